package dev.spillway.ops;

import dev.spillway.event.TopicRange;
import dev.spillway.ops.ConsumerLag.Lag;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.MultiGauge;
import io.micrometer.core.instrument.MultiGauge.Row;
import io.micrometer.core.instrument.Tags;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Consumer lag on {@code /metrics}: every {@link #INTERVAL} the lag of Spillway's consumer groups
 * is read from Kafka ({@link ConsumerLag}) and published per group and topic, so dashboards and
 * alerts see the backlog of every stage without a command. When Kafka cannot be read the series are
 * withdrawn rather than left stale.
 */
public final class ConsumerLagGauges implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(ConsumerLagGauges.class);

  /** How often the lag is read again. */
  public static final Duration INTERVAL = Duration.ofSeconds(15);

  private final String prefix;
  private final Clock clock;
  private final TopicRange range;
  private final MultiGauge records;
  private final MultiGauge oldest;
  private final ScheduledExecutorService executor;
  private volatile boolean failing;
  private volatile Reading latest;

  /** The lag as last read, and when. */
  public record Reading(Instant at, List<Lag> lags) {}

  private ConsumerLagGauges(
      String bootstrapServers,
      Map<String, String> kafkaProperties,
      String prefix,
      MeterRegistry registry,
      Clock clock) {
    this.prefix = prefix;
    this.clock = clock;
    this.range = TopicRange.open(bootstrapServers, kafkaProperties);
    this.records =
        MultiGauge.builder("spillway_consumer_lag_records")
            .description("Records a consumer group has not committed yet, per topic")
            .register(registry);
    this.oldest =
        MultiGauge.builder("spillway_consumer_lag_seconds")
            .description(
                "Age of the oldest record a consumer group has not committed yet, per topic;"
                    + " 0 when none waits")
            .baseUnit("seconds")
            .register(registry);
    this.executor =
        Executors.newSingleThreadScheduledExecutor(
            r -> {
              Thread t = new Thread(r, "spillway-lag");
              t.setDaemon(true);
              return t;
            });
  }

  /** Reads the lag now and then every {@link #INTERVAL} until closed. */
  public static ConsumerLagGauges start(
      String bootstrapServers,
      Map<String, String> kafkaProperties,
      String prefix,
      MeterRegistry registry,
      Clock clock) {
    ConsumerLagGauges gauges =
        new ConsumerLagGauges(bootstrapServers, kafkaProperties, prefix, registry, clock);
    gauges.executor.scheduleWithFixedDelay(
        gauges::refresh, 0, INTERVAL.toMillis(), TimeUnit.MILLISECONDS);
    return gauges;
  }

  /**
   * Reads the lag once and publishes it. Callers take turns: the reader's consumer serves one at a
   * time.
   */
  public synchronized void refresh() {
    List<Lag> lags;
    try {
      lags = ConsumerLag.read(range, prefix);
    } catch (InterruptedException | org.apache.kafka.common.errors.InterruptException e) {
      Thread.currentThread().interrupt();
      return;
    } catch (ExecutionException | RuntimeException e) {
      Throwable cause = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
      if (!failing) {
        log.warn(
            "Could not read consumer lag from Kafka; its metrics are withdrawn until it can: {}",
            String.valueOf(cause.getMessage()));
        failing = true;
      }
      latest = null;
      publish(List.of());
      return;
    }
    if (failing) {
      log.info("Consumer lag read from Kafka again");
      failing = false;
    }
    latest = new Reading(clock.instant().truncatedTo(ChronoUnit.MILLIS), List.copyOf(lags));
    publish(lags);
  }

  /** The last reading; empty before the first and while Kafka cannot be read. */
  public Optional<Reading> latest() {
    return Optional.ofNullable(latest);
  }

  void publish(List<Lag> lags) {
    records.register(lags.stream().map(l -> Row.of(tags(l), l.lag())).toList(), true);
    oldest.register(
        lags.stream().map(l -> Row.of(tags(l), () -> ageSeconds(l, clock.millis()))).toList(),
        true);
  }

  /**
   * Seconds the oldest waiting record has waited; 0 when none waits, NaN (Prometheus's unknown)
   * when records wait whose first could not be read in time: 0 would say none waits.
   */
  static double ageSeconds(Lag l, long nowMillis) {
    Long waited = l.waitedMillis(nowMillis);
    if (waited == null) {
      return l.lag() > 0 ? Double.NaN : 0;
    }
    return waited / 1000.0;
  }

  private static Tags tags(Lag l) {
    return Tags.of("group", l.group(), "topic", l.topic());
  }

  @Override
  public void close() {
    executor.shutdownNow();
    try {
      if (!executor.awaitTermination(10, TimeUnit.SECONDS)) {
        log.warn("Consumer lag reader did not stop within 10 s");
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    range.close();
  }
}
