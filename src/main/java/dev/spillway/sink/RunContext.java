package dev.spillway.sink;

import dev.spillway.health.Health;
import dev.spillway.health.HealthGate;
import dev.spillway.health.LatencyWindow;
import java.time.Clock;
import java.time.Duration;
import java.util.Optional;
import java.util.function.BooleanSupplier;
import javax.sql.DataSource;

/**
 * One run of one batch, as its handler sees it: where to run SQL, how big the next sub-batch may
 * be, and whether it may start at all. Not thread-safe: one handler thread uses it.
 */
public final class RunContext {
  private final Target target;
  private final SinkSettings settings;
  private final HealthGate gate;
  private final Clock clock;
  private final BooleanSupplier stopping;
  private final DataSource dataSource;
  private final LatencyWindow latency;
  private final SinkMetrics metrics;
  private final long startMillis;
  private long rows;
  private int subBatches;

  RunContext(
      Target target,
      SinkSettings settings,
      HealthGate gate,
      Clock clock,
      BooleanSupplier stopping,
      DataSource dataSource,
      LatencyWindow latency,
      SinkMetrics metrics) {
    this.target = target;
    this.settings = settings;
    this.gate = gate;
    this.clock = clock;
    this.stopping = stopping;
    this.dataSource = dataSource;
    this.latency = latency;
    this.metrics = metrics;
    this.startMillis = clock.millis();
  }

  public Target target() {
    return target;
  }

  /** The pool of the target's database. */
  public DataSource dataSource() {
    return dataSource;
  }

  /**
   * Call before each sub-batch. Returns the outcome to end the run with when it must end here (STOP
   * or shutdown → {@link Outcome.Paused}; a per-run limit → {@link Outcome.LimitReached}),
   * otherwise waits the pause due between sub-batches and returns empty.
   */
  public Optional<Outcome> checkpoint() throws InterruptedException {
    Optional<Outcome> end = mustEnd();
    if (end.isPresent() || subBatches == 0) {
      return end;
    }
    Duration pause = health().slowsDown() ? settings.throttlePause() : settings.subBatchPause();
    if (!pause.isZero()) {
      Thread.sleep(pause.toMillis());
      return mustEnd(); // health may have turned to STOP while pausing
    }
    return Optional.empty();
  }

  private Optional<Outcome> mustEnd() {
    if (stopping.getAsBoolean()) {
      return Optional.of(new Outcome.Paused("worker stopping"));
    }
    Health h = health();
    if (h.isStop()) {
      return Optional.of(new Outcome.Paused(h.reason()));
    }
    if (rows >= settings.maxRowsPerRun()) {
      return Optional.of(
          new Outcome.LimitReached(rows, settings.maxRowsPerRun() + " rows per run"));
    }
    if (clock.millis() - startMillis >= settings.maxRuntimePerRun().toMillis()) {
      return Optional.of(
          new Outcome.LimitReached(rows, settings.maxRuntimePerRun().toSeconds() + " s per run"));
    }
    return Optional.empty();
  }

  /**
   * The size for the next sub-batch: {@code requested} when healthy, shrunk (not below the floor,
   * nor above the request) under THROTTLE or UNKNOWN.
   */
  public int subBatchSize(int requested) {
    if (!health().slowsDown()) {
      return requested;
    }
    int shrunk = (int) Math.ceil(requested * settings.throttleFactor());
    return Math.min(requested, Math.max(settings.subBatchFloor(), shrunk));
  }

  /** Records a committed sub-batch: rows count toward the per-run limit, latency toward health. */
  public void subBatchDone(long rowsModified, long nanos) {
    rows += rowsModified;
    subBatches++;
    latency.record(Duration.ofNanos(nanos));
    metrics.subBatch(rowsModified, nanos);
  }

  /** Rows modified so far in this run. */
  public long rows() {
    return rows;
  }

  private Health health() {
    return gate.state(target.database(), target.table());
  }
}
