package dev.spillway.sink;

import dev.spillway.event.TableName;
import dev.spillway.health.Health;
import dev.spillway.health.HealthGate;
import dev.spillway.health.LatencyWindow;
import java.nio.charset.StandardCharsets;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.function.BooleanSupplier;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.producer.Producer;

/** Sink workers, handlers and gates for tests that drive a worker turn by turn. */
final class TestWorkers {
  private TestWorkers() {}

  /**
   * A worker reading {@code topic} (its share of batches in flight {@code topicInFlight}) through
   * {@code consumer}, putting batches back, aside and into the dead letters ({@code topic.delayed},
   * {@code topic.dlq}) through {@code producer}.
   */
  static SinkWorker worker(
      Consumer<byte[], byte[]> consumer,
      Producer<byte[], byte[]> producer,
      String topic,
      int topicInFlight,
      BatchHandler handler,
      HealthGate gate,
      SinkSettings settings,
      SinkMetrics metrics) {
    Clock clock = Clock.systemUTC();
    UnitOfWork unit =
        new UnitOfWork(
            handler,
            settings,
            gate,
            new Requeuer(producer, topic + ".delayed", topic + ".dlq", clock),
            metrics,
            clock,
            db -> null,
            db -> new LatencyWindow(clock, Duration.ofMinutes(1)));
    return new SinkWorker(
        "test-sink",
        consumer,
        List.of(new BatchesTopic(topic, topicInFlight)),
        handler,
        unit,
        gate,
        settings,
        metrics);
  }

  /** A handler whose batch works on the table its key names, done at once, its offset in runs. */
  static BatchHandler byKey(List<Long> runs) {
    return new BatchHandler() {
      @Override
      public Optional<Target> target(SinkRecord record) {
        return Optional.of(
            new Target("main", TableName.parse(new String(record.key(), StandardCharsets.UTF_8))));
      }

      @Override
      public Outcome execute(SinkRecord record, RunContext context) {
        runs.add(record.offset());
        return new Outcome.Done(1);
      }
    };
  }

  /** Table {@code stopped} at STOP until {@code lifted}, every other table NORMAL. */
  static HealthGate stoppedTable(BooleanSupplier lifted) {
    return (database, table) ->
        !lifted.getAsBoolean() && table != null && table.table().equals("stopped")
            ? new Health.Stop("an operator's switch")
            : Health.NORMAL;
  }

  /**
   * Turns {@code w} one poll at a time, every 5 ms, until {@code done} holds after a turn, at most
   * {@code atMost}.
   */
  static void turnUntil(SinkWorker w, Duration atMost, String why, BooleanSupplier done) {
    org.awaitility.Awaitility.await()
        .atMost(atMost)
        .pollInterval(Duration.ofMillis(5))
        .alias(why)
        .until(
            () -> {
              w.runOnce();
              return done.getAsBoolean();
            });
  }
}
