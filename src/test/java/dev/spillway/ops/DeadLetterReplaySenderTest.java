package dev.spillway.ops;

import static org.assertj.core.api.Assertions.assertThat;

import dev.spillway.sink.SinkHeaders;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Future;
import org.apache.kafka.clients.producer.MockProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.Test;

class DeadLetterReplaySenderTest {
  /**
   * Kafka answers on batch 0 and batch 2 (one partition) and never on batch 1 (another, its leader
   * gone), and on every record of a replay.
   */
  private final MockProducer<byte[], byte[]> producer =
      new MockProducer<>(false, null, new ByteArraySerializer(), new ByteArraySerializer()) {
        @Override
        public synchronized Future<RecordMetadata> send(ProducerRecord<byte[], byte[]> r) {
          super.send(r);
          if (new String(r.value(), StandardCharsets.UTF_8).equals("batch 1")) {
            return new CompletableFuture<>();
          }
          return CompletableFuture.completedFuture(
              new RecordMetadata(new TopicPartition(r.topic(), 0), 0, 0, 0, 0, 0));
        }
      };

  @Test
  void should_record_what_kafka_took_behind_a_batch_it_has_not_answered_when_stopped()
      throws Exception {
    try (DeadLetterReplay.Sender sender =
        new DeadLetterReplay.Sender(() -> producer, "t.replays")) {
      for (int i = 0; i < 3; i++) {
        sender.send(batch(i), Instant.EPOCH);
      }

      sender.finishWithin(Duration.ofMillis(200));

      assertThat(sender.recorded()).isEqualTo(2);
      assertThat(sender.unanswered()).isOne();
      assertThat(producer.history())
          .filteredOn(r -> r.topic().equals("t.replays"))
          .extracting(r -> new String(r.key(), StandardCharsets.UTF_8))
          .containsExactly("letter 0", "letter 2");
    }
  }

  @Test
  void should_record_a_batch_once_kafka_took_it_without_another_sent() throws Exception {
    MockProducer<byte[], byte[]> answeringLater =
        new MockProducer<>(false, null, new ByteArraySerializer(), new ByteArraySerializer());
    try (DeadLetterReplay.Sender sender =
        new DeadLetterReplay.Sender(() -> answeringLater, "t.replays")) {
      sender.send(batch(0), Instant.EPOCH);
      assertThat(answeringLater.history()).as("the batch alone, not yet taken").hasSize(1);

      answeringLater.completeNext();
      sender.recordTaken(); // as each letter read after it is passed over

      assertThat(answeringLater.history())
          .filteredOn(r -> r.topic().equals("t.replays"))
          .extracting(r -> new String(r.key(), StandardCharsets.UTF_8))
          .containsExactly("letter 0");
      answeringLater.completeNext();
      sender.finish();
      assertThat(sender.recorded()).isOne();
    }
  }

  private static ProducerRecord<byte[], byte[]> batch(int i) {
    RecordHeaders h = new RecordHeaders();
    h.add(SinkHeaders.REPLAYED_FROM, ("letter " + i).getBytes(StandardCharsets.UTF_8));
    byte[] value = ("batch " + i).getBytes(StandardCharsets.UTF_8);
    return new ProducerRecord<byte[], byte[]>("t.batches", null, (byte[]) null, value, h);
  }
}
