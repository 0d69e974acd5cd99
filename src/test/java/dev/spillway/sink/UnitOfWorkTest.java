package dev.spillway.sink;

import static org.assertj.core.api.Assertions.assertThat;

import dev.spillway.event.Pipeline;
import dev.spillway.health.HealthGate;
import dev.spillway.health.LatencyWindow;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Clock;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import org.apache.kafka.clients.producer.MockProducer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.Test;

class UnitOfWorkTest {
  private final MockProducer<byte[], byte[]> producer =
      new MockProducer<>(true, null, new ByteArraySerializer(), new ByteArraySerializer());

  /** A unit whose every run pauses having done part of the batch, naming the rest. */
  private UnitOfWork pausingWithRest() {
    Clock clock = Clock.systemUTC();
    BatchHandler handler =
        new BatchHandler() {
          @Override
          public Optional<Target> target(SinkRecord record) {
            return Optional.of(new Target("main", dev.spillway.event.TableName.parse("t")));
          }

          @Override
          public Outcome execute(SinkRecord record, RunContext context) {
            return new Outcome.Paused("worker stopping", "rest".getBytes());
          }
        };
    return new UnitOfWork(
        handler,
        SinkSettings.defaults(),
        HealthGate.ALWAYS_NORMAL,
        new Requeuer(producer, "t.delayed", "t.dlq", clock),
        new SinkMetrics(new SimpleMeterRegistry(), Pipeline.BUFFERS),
        clock,
        db -> null,
        db -> new LatencyWindow(clock, Duration.ofMinutes(1)));
  }

  private static SinkRecord record() {
    return new SinkRecord("t.batches", 0, 7, "k".getBytes(), "whole".getBytes(), 1, Map.of());
  }

  @Test
  void should_put_back_the_rest_of_a_paused_run_and_commit() {
    UnitOfWork.Result r = pausingWithRest().run(record(), () -> true, () -> false);

    assertThat(r.commit()).isTrue();
    assertThat(producer.history()).hasSize(1);
    assertThat(new String(producer.history().get(0).value())).isEqualTo("rest");
    assertThat(producer.history().get(0).topic()).isEqualTo("t.batches");
  }

  @Test
  void should_not_put_back_a_rest_once_the_partition_is_given_up() {
    UnitOfWork.Result r = pausingWithRest().run(record(), () -> true, () -> true);

    assertThat(r.commit()).isFalse();
    assertThat(producer.history()).as("its new owner runs the record").isEmpty();
  }
}
