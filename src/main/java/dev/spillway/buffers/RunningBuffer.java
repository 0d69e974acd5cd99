package dev.spillway.buffers;

import dev.failsafe.RateLimiter;
import dev.spillway.event.TableName;
import dev.spillway.sink.Outcome;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One buffer while the pipeline runs: its settings, its table as the catalog describes it (columns
 * followed as they change), its handler and the limits every call of the handler passes through.
 */
final class RunningBuffer {
  private static final Logger log = LoggerFactory.getLogger(RunningBuffer.class);

  /** How long a wait goes between two checkpoints. */
  private static final Duration CHECK_EVERY = Duration.ofMillis(100);

  /** The most batches whose retries are remembered between runs; past it, one is forgotten. */
  static final int RETRYING_KEPT = 10_000;

  /**
   * Where a batch's calls stand when a run ended between them (the worker stopping, health at
   * STOP): the next run goes on from there rather than call again at once as a first attempt.
   *
   * @param attempts the calls made so far
   * @param notBeforeNanos when the next call may be made, on {@link System#nanoTime()}'s scale
   * @param handled the ids (as {@link BatchRun} compares them) the last call took and whose rows
   *     may not be deleted yet: the next run deletes those still there rather than hand them over
   *     again
   * @param reason why the last call left rows, or null when it left none
   * @param stage whether the batch is still being called, given up, or already dead-lettered
   */
  record Retrying(
      int attempts, long notBeforeNanos, Set<Object> handled, String reason, Stage stage) {
    Retrying {
      handled = Set.copyOf(handled);
    }

    Retrying(int attempts, long notBeforeNanos, Set<Object> handled, String reason) {
      this(attempts, notBeforeNanos, handled, reason, Stage.CALLING);
    }

    Retrying(int attempts, long notBeforeNanos) {
      this(attempts, notBeforeNanos, Set.of(), null);
    }

    /** A batch dead-lettered whose rows, these ids, are still to be deleted. */
    static Retrying afterDeadLetter(Collection<Object> ids) {
      return new Retrying(0, 0, Set.copyOf(ids), null, Stage.DEAD_LETTERED);
    }

    /** Calls ended with rows left, to be dead-lettered. */
    static Retrying givenUp(int attempts, boolean rejected, String reason) {
      return new Retrying(
          attempts, 0, Set.of(), reason, rejected ? Stage.REJECTED : Stage.EXHAUSTED);
    }

    /** The same, its handled rows deleted. */
    Retrying deleted() {
      return new Retrying(attempts, notBeforeNanos, Set.of(), reason, stage);
    }

    boolean givenUp() {
      return stage == Stage.EXHAUSTED || stage == Stage.REJECTED;
    }
  }

  /** Where a batch remembered between runs stands. */
  enum Stage {
    /** Its calls go on: the next run numbers on after {@code attempts}. */
    CALLING,
    /**
     * Its last allowed call left rows, to be dead-lettered: the next run, should its letter not
     * have been written, calls no more and dead-letters it again.
     */
    EXHAUSTED,
    /** The handler rejected it; otherwise as {@link #EXHAUSTED}. */
    REJECTED,
    /**
     * Dead-lettered, its rows to be deleted ({@code on-exhausted: delete}): the next run deletes
     * them and does no more, rather than call the handler again and dead-letter the batch twice;
     * {@code handled} holds the ids of those rows as the batch has them.
     */
    DEAD_LETTERED
  }

  final BufferSettings settings;
  private final AtomicReference<BufferTable> table;
  final BulkHandler handler;
  final BufferMetrics metrics;
  // A fair semaphore, not failsafe's Bulkhead: a Bulkhead hands a permit released later to a
  // wait that had already timed out, and so loses it for good.
  private final Semaphore concurrency;
  private final Optional<RateLimiter<Object>> rate;
  private final Map<String, Retrying> retrying = new ConcurrentHashMap<>();

  /**
   * Until when ({@code System.nanoTime()}) the handler asked not to be called, by a retry naming
   * its time ({@code Retry-After}); no call of the buffer's starts sooner. Its initial value is in
   * the past.
   */
  private final AtomicLong quietUntil = new AtomicLong(System.nanoTime());

  RunningBuffer(
      BufferSettings settings, BufferTable table, BulkHandler handler, BufferMetrics metrics) {
    this.settings = settings;
    this.table = new AtomicReference<>(table);
    this.handler = handler;
    this.metrics = metrics;
    this.concurrency = new Semaphore(settings.maxInFlight(), true);
    this.rate =
        settings
            .rateLimit()
            .map(
                perSecond ->
                    RateLimiter.<Object>smoothBuilder(
                            Duration.ofNanos(Math.max(1, Math.round(1e9 / perSecond))))
                        .build());
  }

  /**
   * Where the retries of the batch with this key (its group id; a replay's tells which) stand, when
   * a run left it between calls.
   */
  Optional<Retrying> retrying(String key) {
    return Optional.ofNullable(retrying.get(key));
  }

  /**
   * Remembers where a batch's retries stand, for its next run should this one end first. Past
   * {@link #RETRYING_KEPT} batches it forgets the one whose loss costs least: a batch whose calls
   * go on with no rows a call took left to delete (forgotten, its count of attempts only starts
   * again), then one with such rows (they would be handed over again), and only when all it
   * remembers were given up or dead-lettered one such (it would be called and dead-lettered again).
   */
  void retrying(String key, Retrying at) {
    if (retrying.size() >= RETRYING_KEPT && !retrying.containsKey(key)) {
      String forgotten = null;
      int cost = Integer.MAX_VALUE;
      for (Map.Entry<String, Retrying> e : retrying.entrySet()) {
        int c = forgettingCost(e.getValue());
        if (c < cost) {
          forgotten = e.getKey();
          cost = c;
          if (c == 0) {
            break;
          }
        }
      }
      if (forgotten != null) {
        retrying.remove(forgotten); // a batch left to another worker, say
      }
    }
    retrying.put(key, at);
  }

  private static int forgettingCost(Retrying r) {
    if (r.stage() != Stage.CALLING) {
      return 2;
    }
    return r.handled().isEmpty() ? 0 : 1;
  }

  /** The batch was handled or given up: nothing more to remember. */
  void settled(String key) {
    retrying.remove(key);
  }

  /** The buffer table as last read from the catalog. */
  BufferTable table() {
    return table.get();
  }

  /**
   * Reads the columns of the buffer table, and of its archive table if it has one, in one catalog
   * read, and takes the buffer table's when they changed; whether they now differ from those of
   * {@code seen}. Fails, saying which, when the archive table lacks one of the buffer table's
   * columns (either table may have changed): no row could be archived whole.
   *
   * <p>Runs of one buffer call this at once, each before its handler: nothing here is locked, and a
   * run that read columns as another took newer ones leaves those (the statements that archive
   * check the columns themselves, so an older list only costs them one more read).
   */
  boolean refresh(Connection c, BufferTable seen) throws SQLException {
    BufferTable t = table.get();
    List<TableName> tables = new ArrayList<>(List.of(t.table()));
    t.archive().ifPresent(tables::add);
    List<List<String>> read = BufferStatements.columns(c, tables);
    List<String> now = read.get(0);
    if (now.isEmpty()) {
      throw new SQLException(
          "Buffer " + settings.name() + ": table " + t.table().displayName() + " is gone", "42P01");
    }
    if (t.archive().isPresent()) {
      if (read.get(1).isEmpty()) {
        throw new SQLException(
            "Buffer "
                + settings.name()
                + ": archive-table "
                + t.archive().get().displayName()
                + " does not exist (dropped or renamed?); make it again, then replay what was"
                + " dead-lettered meanwhile",
            "42P01");
      }
      List<String> lacked = BufferStatements.lacking(read.get(1), now);
      if (!lacked.isEmpty()) {
        throw new SQLException(
            "Buffer "
                + settings.name()
                + ": archive-table "
                + t.archive().get().displayName()
                + " lacks the column(s) "
                + String.join(", ", lacked)
                + " that table "
                + t.table().displayName()
                + " has; add them to it, then replay what was dead-lettered meanwhile",
            "42703");
      }
    }
    if (!now.equals(t.columns()) && table.compareAndSet(t, t.withColumns(now))) {
      log.info(
          "Buffer {}: table {} now has the columns {}",
          settings.name(),
          t.table().displayName(),
          String.join(", ", now));
    }
    return !now.equals(seen.columns());
  }

  /** Asked between slices of a wait: throws when the run must end there. */
  @FunctionalInterface
  interface Checkpoint {
    void check() throws InterruptedException, RunEnded;
  }

  /** The run must end where it is: the worker stops, health says STOP, or a limit is reached. */
  static final class RunEnded extends Exception {
    final transient Outcome outcome;

    RunEnded(Outcome outcome) {
      super(String.valueOf(outcome), null, false, false);
      this.outcome = outcome;
    }
  }

  /**
   * Closes the handler; a class handler once none of its calls runs, so its {@code close()} comes
   * after its last call: waits until {@code deadline} ({@code System.nanoTime()}) for those under
   * way, and no call starts after. Past it, or interrupted, closes it all the same, saying so. A
   * built-in one is closed at once: the sql handler's close cancels the statements still running.
   */
  void closeHandler(long deadline) throws Exception {
    if (!(settings.handler() instanceof HandlerSpec.JavaClass)) {
      handler.close();
      return;
    }
    boolean idle = false;
    try {
      idle =
          concurrency.tryAcquire(
              settings.maxInFlight(),
              Math.max(0, deadline - System.nanoTime()),
              TimeUnit.NANOSECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    if (!idle) {
      log.warn(
          "A call of buffer {}'s handler is still under way; its handler is closed all the same",
          settings.name());
    }
    handler.close();
  }

  /**
   * Calls the handler once it may: within {@code max-in-flight} calls at once and {@code
   * rate-limit} calls per second, and not before the time a retry named, asking {@code checkpoint}
   * while it waits so a stopping worker is not held up by a slow rate. An exception from the
   * handler is a retryable failure, and so are the errors a handler may throw without harm to the
   * JVM (linkage, assertion, stack overflow).
   */
  BulkHandler.Result call(BulkHandler.Batch batch, Checkpoint checkpoint)
      throws InterruptedException, RunEnded {
    while (true) {
      // A receiver that said when to come back (429 or 503 with Retry-After) is not called by the
      // buffer's other batches before then either: also not by one that had its permit, or its
      // rate slot, by the time it said so.
      sleepQuiet(checkpoint);
      while (!concurrency.tryAcquire(CHECK_EVERY.toNanos(), TimeUnit.NANOSECONDS)) {
        checkpoint.check();
      }
      BulkHandler.Result result;
      try {
        if (rate.isPresent()) {
          // Reserved, then waited for: trying for a permit due later than the try's wait returns
          // at once, so waiting by tries would spin. A run that ends meanwhile leaves its slot
          // unused.
          sleep(rate.get().reservePermit(), checkpoint);
        }
        if (quietUntil.get() - System.nanoTime() > 0) {
          continue; // told to wait meanwhile: the permit goes back while it does
        }
        result = handled(batch, checkpoint);
        if (result instanceof BulkHandler.Result.Retry r && BufferSettings.namesAWait(r.after())) {
          // Set before the permit goes back, so no call waiting for it starts sooner.
          long until = System.nanoTime() + settings.retryWait(batch.attempt(), r.after()).toNanos();
          quietUntil.accumulateAndGet(until, (a, b) -> a - b >= 0 ? a : b);
        }
      } finally {
        concurrency.release();
      }
      metrics.call(result);
      return result;
    }
  }

  private void sleepQuiet(Checkpoint checkpoint) throws InterruptedException, RunEnded {
    long quiet = quietUntil.get() - System.nanoTime();
    if (quiet > 0) {
      sleep(Duration.ofNanos(quiet), checkpoint);
    }
  }

  /** The handler's answer; what it throws, or no answer, is a retry. */
  private BulkHandler.Result handled(BulkHandler.Batch batch, Checkpoint checkpoint)
      throws InterruptedException, RunEnded {
    BulkHandler.Result result;
    try {
      result = handler.handle(batch);
    } catch (Exception | LinkageError | AssertionError | StackOverflowError e) {
      if (e instanceof InterruptedException) {
        // Only a stopping worker interrupts a run, and then the run ends here. One the handler
        // throws of its own is its failure: rethrown, the batch would run again at once with the
        // same attempt, and so on without end.
        checkpoint.check();
      }
      // A handler's own errors too: a class it needs is missing, an assertion, a deep recursion.
      result =
          BulkHandler.Result.retry(
              "handler failed: " + e.getClass().getSimpleName() + ": " + e.getMessage());
    }
    return result == null ? BulkHandler.Result.retry("handler returned no result") : result;
  }

  /** Sleeps for {@code wait}, asking {@code checkpoint} first and at least every 100 ms. */
  static void sleep(Duration wait, Checkpoint checkpoint) throws InterruptedException, RunEnded {
    long until = System.nanoTime() + wait.toNanos();
    while (true) {
      checkpoint.check();
      long left = until - System.nanoTime();
      if (left <= 0) {
        return;
      }
      Thread.sleep(Math.max(1, Math.min(CHECK_EVERY.toMillis(), left / 1_000_000)));
    }
  }
}
