package dev.spillway.sink;

import dev.spillway.health.Health;
import dev.spillway.health.HealthGate;
import dev.spillway.health.LatencyWindow;
import java.time.Clock;
import java.time.Duration;
import java.util.Collections;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.function.Function;
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
  private final Function<String, DataSource> dataSources;
  private final Function<String, LatencyWindow> latencies;
  private final SinkMetrics metrics;
  private final Run run;

  /** What every view of one run shares: its limits count rows and time across targets. */
  private static final class Run {
    /** When the run began, or, when it paused before its first sub-batch, when that pause ended. */
    long startMillis;

    long rows;

    /** Whether a checkpoint has let the run's first sub-batch go. */
    boolean begun;

    /** The table the run last gated on or took a connection for: where it works now. */
    Target at;

    Run(long startMillis, Target at) {
      this.startMillis = startMillis;
      this.at = at;
    }
  }

  RunContext(
      Target target,
      SinkSettings settings,
      HealthGate gate,
      Clock clock,
      BooleanSupplier stopping,
      Function<String, DataSource> dataSources,
      Function<String, LatencyWindow> latencies,
      SinkMetrics metrics) {
    this(
        target,
        settings,
        gate,
        clock,
        stopping,
        dataSources,
        latencies,
        metrics,
        new Run(clock.millis(), target));
  }

  private RunContext(
      Target target,
      SinkSettings settings,
      HealthGate gate,
      Clock clock,
      BooleanSupplier stopping,
      Function<String, DataSource> dataSources,
      Function<String, LatencyWindow> latencies,
      SinkMetrics metrics,
      Run run) {
    this.target = target;
    this.settings = settings;
    this.gate = gate;
    this.clock = clock;
    this.stopping = stopping;
    this.dataSources = dataSources;
    this.latencies = latencies;
    this.metrics = metrics;
    this.run = run;
  }

  /**
   * The same run working on another table, perhaps in another database: checkpoints gate on that
   * table's health and {@link #dataSource()} is its database's pool, while rows, sub-batches and
   * runtime still count toward this run's limits. For batches that modify several tables.
   */
  public RunContext forTarget(Target other) {
    return new RunContext(
        other, settings, gate, clock, stopping, dataSources, latencies, metrics, run);
  }

  public Target target() {
    return target;
  }

  /** The pool of the target's database. */
  public DataSource dataSource() {
    run.at = target;
    return dataSources.apply(target.database());
  }

  /** The table the run works on now, of whichever view of it last gated or took a connection. */
  Target at() {
    return run.at;
  }

  /** How often a pause looks whether the run must end meanwhile. */
  private static final long PAUSE_SLICE_MILLIS = 50;

  /**
   * Call before each sub-batch. Returns the outcome to end the run with when it must end here (STOP
   * or shutdown → {@link Outcome.Paused}; a per-run limit, after its first sub-batch → {@link
   * Outcome.LimitReached}), otherwise waits the pause due and returns empty: {@code
   * sub-batch-pause} between sub-batches, and under THROTTLE or UNKNOWN {@code throttle-pause} (or
   * {@code sub-batch-pause}, when longer) before each, the run's first included, so runs of one
   * sub-batch each (a buffer's batch, a small cleanup) do not follow one another at full speed.
   */
  public Optional<Outcome> checkpoint() throws InterruptedException {
    // The first checkpoint to let work through, even if that work then found nothing to do (a
    // child table none of whose rows refer to the parents).
    boolean first = !run.begun;
    // The run's first sub-batch goes whatever the time spent getting to it (a loose foreign key's
    // parents looked up in a slow database, say): a run that could end before any work would end
    // every time, and the batch never move.
    Optional<Outcome> end = first ? stopped() : mustEnd();
    if (end.isPresent()) {
      return end;
    }
    boolean slowed = health().slowsDown();
    if (first && !slowed) {
      run.begun = true;
      return end;
    }
    // Slowed down, never sooner than when healthy.
    Duration pause =
        slowed
            ? Collections.max(List.of(settings.throttlePause(), settings.subBatchPause()))
            : settings.subBatchPause();
    long until = System.nanoTime() + pause.toNanos();
    for (long left = pause.toNanos(); left > 0; left = until - System.nanoTime()) {
      Thread.sleep(Math.min(PAUSE_SLICE_MILLIS, TimeUnit.NANOSECONDS.toMillis(left) + 1));
      // Health may turn to STOP, or the worker stop, while pausing. A pause before the first
      // sub-batch does not count toward the run's time: a run ends at a limit only after work.
      end = first ? stopped() : mustEnd();
      if (end.isPresent()) {
        return end;
      }
    }
    if (first) {
      run.startMillis = clock.millis();
      run.begun = true;
    }
    return Optional.empty();
  }

  /**
   * The outcome to end the run with when it must end here, without the pause {@link #checkpoint()}
   * takes: for the slices of a wait, which must not grow by a pause each.
   */
  public Optional<Outcome> mustEnd() {
    Optional<Outcome> stopped = stopped();
    if (stopped.isPresent()) {
      return stopped;
    }
    if (run.rows >= settings.maxRowsPerRun()) {
      return Optional.of(
          new Outcome.LimitReached(run.rows, settings.maxRowsPerRun() + " rows per run"));
    }
    if (clock.millis() - run.startMillis >= settings.maxRuntimePerRun().toMillis()) {
      return Optional.of(
          new Outcome.LimitReached(
              run.rows, settings.maxRuntimePerRun().toSeconds() + " s per run"));
    }
    return Optional.empty();
  }

  /** The run's end when the worker stops or health says STOP, limits aside. */
  private Optional<Outcome> stopped() {
    run.at = target;
    if (stopping.getAsBoolean()) {
      return Optional.of(new Outcome.Paused("worker stopping"));
    }
    Health h = health();
    return h.isStop() ? Optional.of(new Outcome.Paused(h.reason())) : Optional.empty();
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
    run.rows += rowsModified;
    latencies.apply(target.database()).record(Duration.ofNanos(nanos));
    metrics.subBatch(rowsModified, nanos);
  }

  /** Rows modified so far in this run. */
  public long rows() {
    return run.rows;
  }

  private Health health() {
    return gate.state(target.database(), target.table());
  }
}
