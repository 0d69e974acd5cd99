package dev.spillway.sink;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Clock;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.Map;
import org.apache.kafka.clients.producer.MockProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.Test;

class RequeuerTest {
  private static final Instant NOW = Instant.parse("2026-11-24T08:00:00Z");

  private final MockProducer<byte[], byte[]> producer =
      new MockProducer<>(true, null, new ByteArraySerializer(), new ByteArraySerializer());
  private final Requeuer requeuer =
      new Requeuer(producer, "t.delayed", "t.dlq", Clock.fixed(NOW, ZoneOffset.UTC));

  private static SinkRecord record() {
    return new SinkRecord("t.batches", 1, 42, "k".getBytes(), "v".getBytes(), 2, Map.of());
  }

  @Test
  void should_give_a_dead_letter_the_time_it_failed_as_its_record_time_and_header()
      throws Exception {
    requeuer.deadLetter(record(), new IllegalStateException("broken"), "rest".getBytes(), Map.of());

    ProducerRecord<byte[], byte[]> dead = producer.history().get(0);
    assertThat(dead.topic()).isEqualTo("t.dlq");
    assertThat(dead.timestamp()).isEqualTo(NOW.toEpochMilli());
    assertThat(SinkHeaders.failedAt(dead.headers())).hasValue(NOW.toEpochMilli());
    assertThat(new String(dead.value())).isEqualTo("rest");
    assertThat(SinkHeaders.text(dead.headers(), SinkHeaders.SOURCE)).isEqualTo("t.batches-1@42");
  }

  @Test
  void should_give_a_dead_letter_the_handlers_headers_in_place_of_those_the_record_had()
      throws Exception {
    SinkRecord replayed =
        new SinkRecord(
            "t.batches", 1, 42, "k".getBytes(), "v".getBytes(), 0, Map.of("x", "old".getBytes()));

    requeuer.deadLetter(
        replayed, new IllegalStateException("broken"), null, Map.of("x", "new".getBytes()));

    ProducerRecord<byte[], byte[]> dead = producer.history().get(0);
    assertThat(dead.headers().headers("x"))
        .singleElement()
        .satisfies(h -> assertThat(new String(h.value())).isEqualTo("new"));
  }

  @Test
  void should_not_give_a_dead_letter_the_reason_it_once_stepped_aside() throws Exception {
    SinkRecord once =
        new SinkRecord(
            "t.batches",
            1,
            42,
            "k".getBytes(),
            "v".getBytes(),
            0,
            Map.of(SinkHeaders.STEPPED_ASIDE, "public.t is at STOP".getBytes()));

    requeuer.deadLetter(once, new IllegalStateException("broken"), null, Map.of());

    assertThat(producer.history().get(0).headers().lastHeader(SinkHeaders.STEPPED_ASIDE)).isNull();
  }

  @Test
  void should_put_back_just_the_value_it_is_given_with_the_attempts_it_is_told() throws Exception {
    requeuer.requeue(record(), 2, "rest".getBytes());

    ProducerRecord<byte[], byte[]> back = producer.history().get(0);
    assertThat(back.topic()).isEqualTo("t.batches");
    assertThat(back.timestamp()).as("none given: Kafka stamps the send time").isNull();
    assertThat(new String(back.key())).isEqualTo("k");
    assertThat(new String(back.value())).isEqualTo("rest");
    assertThat(
            SinkHeaders.attempts(
                Map.of(
                    SinkHeaders.ATTEMPTS, back.headers().lastHeader(SinkHeaders.ATTEMPTS).value())))
        .isEqualTo(2);
  }
}
