package dev.spillway.sink;

import dev.spillway.event.Pipeline;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/** Counters of one pipeline's sink, as Prometheus sees them. Thread-safe. */
public final class SinkMetrics {
  private final MeterRegistry registry;
  private final String pipeline;
  private final Map<String, Counter> outcomes = new ConcurrentHashMap<>();
  private final Map<Target, Counter> lockTimeouts = new ConcurrentHashMap<>();
  private final Counter rows;
  private final Counter deadLettered;
  private final Counter delayed;
  private final Counter requeued;
  private final Counter steppedAside;
  private final Timer subBatch;
  private final AtomicInteger pausedPartitions = new AtomicInteger();
  private volatile Gauge delayedWaiting;

  public SinkMetrics(MeterRegistry registry, Pipeline pipeline) {
    this.registry = registry;
    this.pipeline = pipeline.id();
    this.rows = counter("spillway_sink_rows", "Rows modified by sub-batches");
    this.deadLettered = counter("spillway_sink_dead_lettered", "Batches sent to the .dlq topic");
    this.delayed = counter("spillway_sink_delayed", "Batches sent to the delay topic");
    this.requeued =
        counter(
            "spillway_sink_requeued",
            "Batches re-enqueued after a limit, or what was left of them after a pause");
    this.steppedAside =
        counter(
            "spillway_sink_stepped_aside",
            "Batches sent to the delay topic from the head of their partition, where they waited"
                + " for a table at STOP");
    this.subBatch =
        Timer.builder("spillway_sink_sub_batch")
            .description("Sub-batch latency")
            .tag("pipeline", this.pipeline)
            .publishPercentileHistogram()
            .minimumExpectedValue(Duration.ofMillis(1))
            .maximumExpectedValue(Duration.ofMinutes(1))
            .register(registry);
    Gauge.builder("spillway_sink_paused_partitions", pausedPartitions, AtomicInteger::get)
        .description("Partitions paused: work in hand, or health STOP")
        .tag("pipeline", this.pipeline)
        .register(registry);
  }

  private Counter counter(String name, String description) {
    return Counter.builder(name)
        .description(description)
        .tag("pipeline", pipeline)
        .register(registry);
  }

  void outcome(Outcome o) {
    String name = o.getClass().getSimpleName();
    outcomes
        .computeIfAbsent(
            name,
            n ->
                Counter.builder("spillway_sink_batches")
                    .description("Batch runs by outcome")
                    .tag("pipeline", pipeline)
                    .tag("outcome", n)
                    .register(registry))
        .increment();
  }

  /** A run that gave up waiting for a lock on this table at its database's lock timeout. */
  void lockTimeout(Target at) {
    lockTimeouts
        .computeIfAbsent(
            at,
            t ->
                Counter.builder("spillway_sink_lock_timeouts")
                    .description(
                        "Runs that gave up waiting for a lock at the database's lock-timeout")
                    .tag("pipeline", pipeline)
                    .tag("database", t.database())
                    .tag("table", t.table().toString())
                    .register(registry))
        .increment();
  }

  void subBatch(long rowCount, long nanos) {
    rows.increment(rowCount);
    subBatch.record(Duration.ofNanos(nanos));
  }

  void deadLettered() {
    deadLettered.increment();
  }

  void delayed() {
    delayed.increment();
  }

  void requeued() {
    requeued.increment();
  }

  void steppedAside() {
    steppedAside.increment();
  }

  /** Reports the delayed batches this releaser holds, until {@link #releaserClosed()}. */
  void delayedWaiting(DelayedReleaser releaser) {
    delayedWaiting =
        Gauge.builder("spillway_sink_delayed_waiting", releaser, DelayedReleaser::waiting)
            .description("Delayed batches read from the delay topic and not yet released")
            .tag("pipeline", pipeline)
            .strongReference(true)
            .register(registry);
  }

  /** The releaser is closed: a sink started later in this registry reports its own. */
  void releaserClosed() {
    if (delayedWaiting != null) {
      registry.remove(delayedWaiting);
    }
  }

  void pausedPartitions(int delta) {
    pausedPartitions.addAndGet(delta);
  }

  public long deadLetteredCount() {
    return (long) deadLettered.count();
  }

  public long delayedCount() {
    return (long) delayed.count();
  }

  public long requeuedCount() {
    return (long) requeued.count();
  }

  public long rowsCount() {
    return (long) rows.count();
  }

  public int pausedPartitionCount() {
    return pausedPartitions.get();
  }
}
