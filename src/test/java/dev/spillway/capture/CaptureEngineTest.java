package dev.spillway.capture;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.spillway.event.TableName;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.producer.MockProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** How tables are named to Debezium, and how captured changes are handed to Kafka. */
class CaptureEngineTest {
  private static final List<ProducerRecord<byte[], byte[]>> CHANGES =
      List.of(
          new ProducerRecord<>("t.events", "1".getBytes(), "a".getBytes()),
          new ProducerRecord<>("t.events", "2".getBytes(), "b".getBytes()));

  @Test
  void should_send_changes_again_while_kafka_cannot_take_them_until_it_does() throws Exception {
    AtomicInteger attempts = new AtomicInteger();
    MockProducer<byte[], byte[]> producer =
        new MockProducer<>(true, null, new ByteArraySerializer(), new ByteArraySerializer()) {
          @Override
          public synchronized Future<RecordMetadata> send(ProducerRecord<byte[], byte[]> r) {
            if (r.key()[0] == '1' && attempts.incrementAndGet() <= 3) {
              throw new TimeoutException("Topic t.events not present in metadata after 3000 ms.");
            }
            return super.send(r);
          }
        };

    boolean interrupted =
        CaptureEngine.handOver(producer, CHANGES, "main", Duration.ofMillis(10), false);

    assertThat(interrupted).isFalse();
    assertThat(attempts).as("three refusals, then taken").hasValue(4);
    assertThat(producer.history()).extracting(r -> new String(r.key())).containsExactly("1", "2");
  }

  @Test
  void should_fail_the_batch_when_kafka_refuses_it_for_good() {
    MockProducer<byte[], byte[]> producer =
        new MockProducer<>(true, null, new ByteArraySerializer(), new ByteArraySerializer());
    producer.sendException = new RecordTooLargeException("The message is 2000000 bytes");

    assertThatThrownBy(
            () -> CaptureEngine.handOver(producer, CHANGES, "main", Duration.ofMillis(10), false))
        .isInstanceOf(IllegalStateException.class)
        .hasMessage(
            "Kafka refused 2 captured changes of database main: The message is 2000000 bytes");
  }

  @Test
  void should_stop_sending_again_when_capture_is_stopping() {
    MockProducer<byte[], byte[]> producer =
        new MockProducer<>(true, null, new ByteArraySerializer(), new ByteArraySerializer());
    producer.sendException = new TimeoutException("Topic t.events not present in metadata");

    assertThatThrownBy(
            () -> CaptureEngine.handOver(producer, CHANGES, "main", Duration.ofMillis(10), true))
        .isInstanceOf(InterruptedException.class);
  }

  @ParameterizedTest
  @ValueSource(strings = {"Events+EU", "a,b", "audit$events", "events"})
  void should_name_a_table_for_a_snapshot_as_a_literal_pattern(String table) {
    String name = CaptureEngine.snapshotName(new TableName("app", table));

    assertThat("app." + table).matches(name);
    assertThat("app." + table + "x").doesNotMatch(name);
  }

  @ParameterizedTest
  @ValueSource(strings = {"x.y", "my events", "say\"hi\"", "it's", "back`tick"})
  void should_refuse_a_name_debezium_would_read_back_as_another_table(String table) {
    assertThatThrownBy(() -> CaptureEngine.snapshotName(new TableName("app", table)))
        .isInstanceOf(CaptureSetupException.class)
        .hasMessageStartingWith("Table app." + table + " holds rows from before capture");
  }
}
