package dev.spillway.sink;

import dev.failsafe.Failsafe;
import dev.failsafe.FailsafeException;
import dev.failsafe.RetryPolicy;
import dev.spillway.health.Health;
import dev.spillway.health.HealthGate;
import dev.spillway.health.LatencyWindow;
import dev.spillway.support.Backoff;
import java.time.Clock;
import java.time.Duration;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;
import java.util.function.Function;
import java.util.function.Supplier;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One batch, run to an outcome and acted on: retryable failures are retried with backoff; a limit
 * re-enqueues or delays the batch; exhausted and permanent failures go to the dead-letter topic.
 * The result says whether the offset may be committed.
 */
final class UnitOfWork {
  private static final Logger log = LoggerFactory.getLogger(UnitOfWork.class);

  /** How far a retry's wait may be from its backoff, either way, as a share of it. */
  private static final double RETRY_JITTER = 0.2;

  /** How often a retry's wait looks whether the worker stops. */
  private static final Duration STOP_CHECK = Duration.ofMillis(50);

  /**
   * What the worker loop does with the record once the unit ends.
   *
   * @param waitFor for a run that ended paused, uncommitted, the table it was working on: the batch
   *     waits while that table is at STOP (null otherwise)
   */
  record Result(SinkRecord record, Outcome outcome, boolean commit, Target waitFor) {
    Result(SinkRecord record, Outcome outcome, boolean commit) {
      this(record, outcome, commit, null);
    }
  }

  /** How a run ended, and the table it was working on then (null when it had none). */
  private record Ended(Outcome outcome, Target at) {}

  /** How many rests Kafka would not take back are remembered at most, the oldest forgotten. */
  static final int UNSENT_RESTS_KEPT = 1_000;

  /** A paused run's rest Kafka would not take back, and what its batch's value hashes to. */
  private record UnsentRest(int valueHash, Outcome.Paused paused) {}

  /**
   * Rests of paused runs Kafka would not take back, by their batch's position: the batch's next run
   * in this process puts its rest back rather than run it again, which would repeat its done part
   * where no row tells what was done (a batch replayed from its events). Shared by the sink's
   * workers, so one that takes the partition over finds it too; a partition another process takes
   * over runs the batch whole.
   */
  private final Map<String, UnsentRest> unsentRests =
      Collections.synchronizedMap(
          new LinkedHashMap<>() {
            @Override
            protected boolean removeEldestEntry(Map.Entry<String, UnsentRest> eldest) {
              return size() > UNSENT_RESTS_KEPT;
            }
          });

  private final BatchHandler handler;
  private final SinkSettings settings;
  private final HealthGate gate;
  private final Requeuer requeuer;
  private final SinkMetrics metrics;
  private final Clock clock;
  private final Function<String, DataSource> dataSources;
  private final Function<String, LatencyWindow> latency;

  UnitOfWork(
      BatchHandler handler,
      SinkSettings settings,
      HealthGate gate,
      Requeuer requeuer,
      SinkMetrics metrics,
      Clock clock,
      Function<String, DataSource> dataSources,
      Function<String, LatencyWindow> latency) {
    this.handler = handler;
    this.settings = settings;
    this.gate = gate;
    this.requeuer = requeuer;
    this.metrics = metrics;
    this.clock = clock;
    this.dataSources = dataSources;
    this.latency = latency;
  }

  /**
   * @param givenUp whether the worker no longer owns the record's partition: its new owner runs the
   *     record again from its uncommitted offset, so whatever this run ended with, nothing is put
   *     back, delayed or dead-lettered from here (that would be a second copy of the batch)
   */
  Result run(SinkRecord record, BooleanSupplier stopping, BooleanSupplier givenUp) {
    UnsentRest unsent = unsentRest(record);
    Ended ended;
    if (unsent != null) {
      ended = new Ended(unsent.paused(), null);
      log.info("Batch {} puts back the rest its last run left", record.position());
    } else {
      ended = execute(record, stopping);
      metrics.outcome(ended.outcome());
    }
    Outcome outcome = ended.outcome();
    try {
      Result result = act(record, outcome, givenUp, ended.at());
      if (result.commit()) {
        unsentRests.remove(record.position());
      }
      return result;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return new Result(record, new Outcome.Paused("interrupted"), false);
    } catch (ExecutionException | RuntimeException e) {
      // Kafka did not take the batch: leave the offset where it is, it will run again.
      log.warn("Could not re-route batch {}: {}", record.position(), e.getMessage());
      if (outcome instanceof Outcome.Paused p && p.rest() != null) {
        unsentRests.put(record.position(), new UnsentRest(Arrays.hashCode(record.value()), p));
      }
      return new Result(record, new Outcome.RetryableFailure(e), false);
    }
  }

  /**
   * The rest a paused run of this batch left that Kafka would not take back, or null. The batch's
   * value is hashed only when its position has one, not on every run.
   */
  private UnsentRest unsentRest(SinkRecord record) {
    UnsentRest unsent = unsentRests.get(record.position());
    return unsent != null && unsent.valueHash() == Arrays.hashCode(record.value()) ? unsent : null;
  }

  private Ended execute(SinkRecord record, BooleanSupplier stopping) {
    Optional<Target> target;
    try {
      target = handler.target(record);
    } catch (RuntimeException e) {
      return new Ended(new Outcome.PermanentFailure(e), null);
    }
    if (target.isEmpty()) {
      return new Ended(
          new Outcome.PermanentFailure(
              new IllegalArgumentException("Malformed batch at " + record.position())),
          null);
    }
    // The run's view of where it works: a batch over several tables moves from one to the next.
    AtomicReference<RunContext> run = new AtomicReference<>();
    Supplier<Target> at = () -> run.get() == null ? target.get() : run.get().at();
    // The wait before each retry is the run's own, so a stop or a partition taken away ends it
    // within STOP_CHECK; Failsafe's would sleep through them, holding the worker's stop or its
    // rebalance for up to the wait.
    RetryPolicy<Outcome> retry =
        RetryPolicy.<Outcome>builder()
            .handleResultIf(o -> o instanceof Outcome.RetryableFailure)
            .abortIf(o -> stopping.getAsBoolean() || stoppedBy(o, at.get()).isPresent())
            .withMaxRetries(settings.maxRetries())
            .onRetry(
                e ->
                    log.info(
                        "Retrying batch {} (retry {}): {}",
                        record.position(),
                        e.getAttemptCount(),
                        describe(e.getLastResult())))
            .build();
    // What an attempt left to dead-letter (the batch less what it handled), should a later one
    // fail before it could tell: a dead letter of the whole batch would hand over again, when
    // replayed, what was handled.
    AtomicReference<byte[]> rest = new AtomicReference<>();
    Outcome outcome;
    try {
      outcome =
          Failsafe.with(retry)
              .get(
                  attempt -> {
                    Outcome o =
                        attempt.getAttemptCount() > 0
                                && !waitedToRetry(attempt.getAttemptCount(), stopping)
                            ? new Outcome.Paused("worker stopping")
                            : once(record, target.get(), stopping, run);
                    return withRest(o, rest);
                  });
    } catch (FailsafeException e) {
      if (e.getCause() instanceof InterruptedException) {
        Thread.currentThread().interrupt();
        return new Ended(new Outcome.Paused("interrupted"), at.get());
      }
      outcome =
          withRest(new Outcome.RetryableFailure(e.getCause() == null ? e : e.getCause()), rest);
    }
    if (!(outcome instanceof Outcome.RetryableFailure)) {
      return new Ended(outcome, at.get());
    }
    // Failing while the worker stops, or on a database at STOP (unreachable, say), is no fault of
    // the batch: it waits in Kafka like any batch at STOP, its retries not spent.
    if (stopping.getAsBoolean()) {
      return new Ended(new Outcome.Paused("worker stopping"), at.get());
    }
    Optional<String> stop = stoppedBy(outcome, at.get());
    if (stop.isPresent()) {
      log.info(
          "Batch {} waits in Kafka while {} is at STOP ({}); it failed with {}",
          record.position(),
          at.get().table(),
          stop.get(),
          describe(outcome));
      return new Ended(new Outcome.Paused(stop.get()), at.get());
    }
    return new Ended(outcome, at.get());
  }

  /**
   * A failure naming what to dead-letter is remembered in {@code rest}; one naming nothing gets the
   * rest an earlier attempt named. Whatever a later attempt handled it names itself, so the last
   * rest named holds every event still to do.
   */
  private static Outcome withRest(Outcome o, AtomicReference<byte[]> rest) {
    if (o instanceof Outcome.RetryableFailure f) {
      if (f.deadLetter() != null) {
        rest.set(f.deadLetter());
      } else if (rest.get() != null) {
        return new Outcome.RetryableFailure(f.error(), rest.get());
      }
    } else if (o instanceof Outcome.PermanentFailure p) {
      if (p.deadLetter() != null) {
        rest.set(p.deadLetter());
      } else if (rest.get() != null) {
        return new Outcome.PermanentFailure(p.error(), rest.get());
      }
    }
    return o;
  }

  /**
   * Waits before retry {@code n} (1 for the first): {@code retry-backoff} doubled each retry up to
   * {@code retry-backoff-max}, give or take {@link #RETRY_JITTER}.
   *
   * @return false when the worker stops meanwhile
   */
  private boolean waitedToRetry(int n, BooleanSupplier stopping) throws InterruptedException {
    Duration wait = Backoff.doubling(settings.retryBackoff(), n, settings.retryBackoffMax());
    double jitter = RETRY_JITTER * (2 * ThreadLocalRandom.current().nextDouble() - 1);
    long until = System.nanoTime() + (long) (wait.toNanos() * (1 + jitter));
    while (!stopping.getAsBoolean()) {
      long left = until - System.nanoTime();
      if (left <= 0) {
        return true;
      }
      TimeUnit.NANOSECONDS.sleep(Math.min(left, STOP_CHECK.toNanos()));
    }
    return false;
  }

  /**
   * Why a failure is the STOP's rather than the batch's: a database error while the table the run
   * works on is at STOP. Any other failure keeps its retries and its way to the dead letters.
   */
  private Optional<String> stoppedBy(Outcome outcome, Target at) {
    if (!(outcome instanceof Outcome.RetryableFailure f) || !SqlErrors.fromDatabase(f.error())) {
      return Optional.empty();
    }
    Health h = gate.state(at.database(), at.table());
    return h.isStop() ? Optional.of(h.reason()) : Optional.empty();
  }

  private Outcome once(
      SinkRecord record, Target target, BooleanSupplier stopping, AtomicReference<RunContext> run) {
    RunContext context =
        new RunContext(target, settings, gate, clock, stopping, dataSources, latency, metrics);
    run.set(context);
    try {
      return handler.execute(record, context);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return new Outcome.Paused("interrupted");
    } catch (Exception e) {
      if (SqlErrors.lockNotAvailable(e)) {
        // Someone held a lock on the table longer than Spillway's lock timeout: the run ends
        // unfinished, and the batch waits a while rather than wait here (holding its place in
        // the table's lock queue) or spend retries.
        metrics.lockTimeout(context.at());
        return new Outcome.LockTimeout(context.rows(), context.at().table().toString());
      }
      return SqlErrors.classify(e);
    }
  }

  private Result act(SinkRecord record, Outcome outcome, BooleanSupplier givenUp, Target at)
      throws InterruptedException, ExecutionException {
    if (givenUp.getAsBoolean()) {
      return new Result(record, outcome, false);
    }
    if (outcome instanceof Outcome.Paused p && p.rest() != null) {
      // Part of it is done: only the rest goes back, behind what waits, with the same attempts.
      requeuer.requeue(record, record.attempts(), p.rest());
      metrics.requeued();
      told(record, record.attempts(), false);
      return new Result(record, outcome, true);
    }
    if (outcome instanceof Outcome.Done || outcome instanceof Outcome.Paused) {
      // Done: commit. Paused: leave the offset, the batch runs again once allowed.
      boolean done = outcome instanceof Outcome.Done;
      return new Result(record, outcome, done, done ? null : at);
    }
    if (outcome instanceof Outcome.LockTimeout l) {
      int inARow = SinkHeaders.lockWaits(record.headers()) + 1;
      Duration wait = lockBackoff(inARow);
      requeuer.delayForLock(record, inARow, clock.millis() + wait.toMillis());
      metrics.delayed();
      log.info(
          "Batch {} gave up waiting for a lock on {} at the lock timeout ({} in a row); it runs"
              + " again in {}",
          record.position(),
          l.table(),
          inARow,
          wait);
      return new Result(record, outcome, true);
    }
    if (outcome instanceof Outcome.LimitReached l) {
      int attempts = record.attempts() + 1;
      if (attempts >= settings.maxAttempts()) {
        long after = clock.millis() + settings.consumeAfter().toMillis();
        // Rescheduled with its attempts from 0 again: once due, it has as many runs as at first
        // before it waits again, so a parent with millions of children takes a delay per
        // max-attempts runs, not one per run.
        requeuer.delay(record, 0, after);
        metrics.delayed();
        told(record, 0, true);
        log.info(
            "Batch {} reached {} on attempt {}: delayed by {}",
            record.position(),
            l.limit(),
            attempts,
            settings.consumeAfter());
      } else {
        requeuer.requeue(record, attempts);
        metrics.requeued();
        told(record, attempts, false);
      }
      return new Result(record, outcome, true);
    }
    if (outcome instanceof Outcome.RetryableFailure f) {
      return deadLetter(record, outcome, f.error(), f.deadLetter());
    }
    Outcome.PermanentFailure p = (Outcome.PermanentFailure) outcome;
    return deadLetter(record, outcome, p.error(), p.deadLetter());
  }

  /**
   * Sends a batch waiting at the head of its partition for a table at STOP to the delay topic, its
   * attempts as they were, so the batches behind it run meanwhile; it comes back after {@code
   * consume-after}, at the end of its partition ({@code step-aside-after} when longer, so a batch
   * whose table stays at STOP goes round no faster than that).
   *
   * @param givenUp as for {@link #run}: the partition moved, nothing is sent
   */
  Result stepAside(SinkRecord record, Target stop, BooleanSupplier givenUp) {
    if (givenUp.getAsBoolean()) {
      return new Result(record, new Outcome.Paused("its partition moved"), false);
    }
    String reason = gate.state(stop.database(), stop.table()).reason();
    String why = stop.table() + " is at STOP" + (reason.isEmpty() ? "" : ": " + reason);
    // A batch whose rest Kafka would not take back steps aside as that rest, its done part left.
    UnsentRest unsent = unsentRest(record);
    try {
      Duration delay =
          settings.consumeAfter().compareTo(settings.stepAsideAfter()) >= 0
              ? settings.consumeAfter()
              : settings.stepAsideAfter();
      requeuer.stepAside(
          record,
          unsent == null ? record.value() : unsent.paused().rest(),
          clock.millis() + delay.toMillis(),
          why);
      unsentRests.remove(record.position());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return new Result(record, new Outcome.Paused("interrupted"), false, stop);
    } catch (ExecutionException | RuntimeException e) {
      // It still waits for that table: not run again while it is at STOP, but stepped aside
      // again after the retry backoff, doubling while Kafka refuses it.
      log.warn("Could not step batch {} aside: {}", record.position(), e.getMessage());
      return new Result(record, new Outcome.RetryableFailure(e), false, stop);
    }
    metrics.delayed();
    metrics.steppedAside();
    log.info(
        "Batch {} stepped aside to the delay topic, so the batches behind it can run ({})",
        record.position(),
        why);
    return new Result(record, new Outcome.Paused("stepped aside: " + why), true);
  }

  /**
   * Tells the handler its batch went back (for its own counts) once Kafka took it: what the hook
   * throws is said, not taken for Kafka refusing the batch, which would run it again beside the
   * copy put back.
   */
  private void told(SinkRecord record, int attempts, boolean delayed) {
    try {
      handler.requeued(record, attempts, delayed);
    } catch (RuntimeException e) {
      log.warn("After putting batch {} back: {}", record.position(), e.toString());
    }
  }

  /**
   * How long a batch waits after its {@code inARow}-th run in a row gave up a lock wait: the retry
   * backoff, doubling each time, at most the delay of a batch out of attempts.
   */
  Duration lockBackoff(int inARow) {
    return Backoff.doubling(settings.retryBackoff(), inARow, settings.consumeAfter());
  }

  private Result deadLetter(SinkRecord record, Outcome outcome, Throwable error, byte[] value)
      throws InterruptedException, ExecutionException {
    requeuer.deadLetter(record, error, value, handler.deadLetterHeaders(record, error));
    metrics.deadLettered();
    log.warn("Batch {} dead-lettered: {}", record.position(), describe(outcome));
    try {
      handler.deadLettered(record, value == null ? record.value() : value, error);
    } catch (InterruptedException e) {
      throw e;
    } catch (Exception e) {
      // Not committed: the batch runs again, and may be dead-lettered once more.
      log.warn("After dead-lettering {}: {}", record.position(), e.getMessage());
      return new Result(record, new Outcome.RetryableFailure(e), false);
    }
    return new Result(record, outcome, true);
  }

  private static String describe(Outcome o) {
    if (o instanceof Outcome.RetryableFailure f) {
      return f.error().getClass().getSimpleName() + ": " + f.error().getMessage();
    }
    if (o instanceof Outcome.PermanentFailure f) {
      return f.error().getClass().getSimpleName() + ": " + f.error().getMessage();
    }
    return String.valueOf(o);
  }
}
