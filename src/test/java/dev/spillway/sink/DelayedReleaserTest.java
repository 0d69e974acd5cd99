package dev.spillway.sink;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.MockConsumer;
import org.apache.kafka.clients.producer.MockProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.Test;

class DelayedReleaserTest {
  private static final Instant NOW = Instant.parse("2026-11-25T08:00:00Z");
  private static final TopicPartition TP = new TopicPartition("t.delayed", 0);

  private final MockConsumer<byte[], byte[]> consumer = new MockConsumer<>("earliest");
  private final MockProducer<byte[], byte[]> producer =
      new MockProducer<>(true, null, new ByteArraySerializer(), new ByteArraySerializer());
  private final DelayedReleaser releaser =
      new DelayedReleaser(
          consumer,
          producer,
          TP.topic(),
          "t.batches",
          Clock.fixed(NOW, ZoneOffset.UTC),
          Duration.ofMillis(10));

  private void delayed(long offset) {
    RecordHeaders headers = new RecordHeaders();
    headers.add(SinkHeaders.CONSUME_AFTER, SinkHeaders.longValue(NOW.toEpochMilli() - 1));
    consumer.addRecord(
        new ConsumerRecord<>(
            TP.topic(),
            TP.partition(),
            offset,
            0L,
            TimestampType.CREATE_TIME,
            0,
            0,
            ("k" + offset).getBytes(),
            ("batch " + offset).getBytes(),
            headers,
            Optional.empty()));
  }

  @Test
  void should_release_again_what_it_failed_to_release_instead_of_committing_past_it()
      throws Exception {
    consumer.rebalance(List.of(TP));
    consumer.updateBeginningOffsets(Map.of(TP, 0L));
    delayed(0);
    delayed(1);
    producer.sendException = new TimeoutException("no leader for t.batches-0");

    assertThatThrownBy(releaser::runOnce).hasMessageContaining("no leader");
    assertThat(consumer.committed(Set.of(TP))).as("nothing committed").isEmpty();

    assertThat(consumer.position(TP)).as("back to the first batch not released").isZero();

    // What the broker then hands over again (a mock consumer does not keep what it gave).
    producer.sendException = null;
    delayed(0);
    delayed(1);
    delayed(2);
    releaser.runOnce();

    assertThat(producer.history())
        .extracting(r -> new String(r.value()))
        .containsExactly("batch 0", "batch 1", "batch 2");
    assertThat(producer.history()).extracting(ProducerRecord::topic).containsOnly("t.batches");
    assertThat(consumer.committed(Set.of(TP)).get(TP).offset()).isEqualTo(3);
  }
}
