package dev.spillway.buffers;

import dev.spillway.event.BufferBatch;
import dev.spillway.event.BufferEvent;
import dev.spillway.event.EventSerdes;
import dev.spillway.sink.Outcome;
import dev.spillway.sink.RunContext;
import java.nio.ByteBuffer;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Optional;
import java.util.Set;

/**
 * One run of one batch: keep only the events whose rows are still buffered (a redelivered batch
 * skips what an earlier run finished), call the handler, delete what it handled in one statement,
 * and call again for the rest after a backoff, up to {@code max-attempts} calls. What is left then
 * becomes a permanent failure carrying just those events, for the dead-letter topic.
 */
final class BatchRun {
  private static final Duration CHECK_EVERY = Duration.ofMillis(100);

  /** How long a run waits for the transactions that may have inserted rows it did not find. */
  static final Duration VISIBILITY_WAIT = Duration.ofSeconds(5);

  private static final Duration VISIBILITY_CHECK_EVERY = Duration.ofMillis(10);

  private final RunningBuffer buffer;
  private final BufferBatch batch;
  private final RunContext context;
  private final Clock clock;

  BatchRun(RunningBuffer buffer, BufferBatch batch, RunContext context, Clock clock) {
    this.buffer = buffer;
    this.batch = batch;
    this.context = context;
    this.clock = clock;
  }

  Outcome run() throws SQLException, InterruptedException {
    Optional<Outcome> end = context.checkpoint();
    if (end.isPresent()) {
      return end.get();
    }
    Optional<List<BufferEvent>> buffered;
    try {
      buffered = stillBuffered();
    } catch (RunningBuffer.RunEnded e) {
      return e.outcome; // stopping or STOP while waiting: nothing done yet, the batch runs again
    }
    if (buffered.isEmpty()) {
      return new Outcome.LimitReached(0, "rows whose inserting transaction is not yet visible");
    }
    List<BufferEvent> pending = buffered.get();
    if (pending.isEmpty()) {
      return new Outcome.Done(0);
    }
    for (int attempt = 1; ; attempt++) {
      BulkHandler.Result result;
      try {
        result =
            buffer.call(
                BulkHandler.Batch.of(
                    buffer.settings.name(),
                    batch.groupId(),
                    attempt,
                    buffer.table.idColumn(),
                    pending),
                context::checkpoint);
      } catch (RunningBuffer.RunEnded e) {
        return e.outcome; // what earlier calls handled is deleted; the rest runs again later
      }
      List<BufferEvent> done = succeeded(result, pending);
      if (!done.isEmpty()) {
        delete(done);
        pending = without(pending, done);
      }
      if (pending.isEmpty()) {
        return new Outcome.Done(context.rows());
      }
      String reason = reason(result);
      if (result instanceof BulkHandler.Result.Reject || attempt >= buffer.settings.maxAttempts()) {
        return exhausted(pending, attempt, reason);
      }
      Duration wait =
          result instanceof BulkHandler.Result.Retry r && r.after() != null
              ? r.after()
              : buffer.settings.backoff(attempt);
      end = waitFor(wait);
      if (end.isPresent()) {
        return end.get();
      }
    }
  }

  /**
   * The batch's events whose rows are still in the table; empty when that cannot be told yet.
   *
   * <p>A row not found was deleted by an earlier run of the batch, or was inserted by a transaction
   * capture has read but that is not yet visible to other sessions: its commit is in the WAL before
   * the transaction has ended, and on a busy server (or one waiting for a synchronous standby) that
   * gap is long enough for the batch to get here. So rows not found are looked up again once every
   * transaction running after the first look has ended (it releases the lock on its id only once it
   * is visible); if some has not after {@link #VISIBILITY_WAIT}, the run ends and the batch comes
   * back later.
   */
  private Optional<List<BufferEvent>> stillBuffered()
      throws SQLException, InterruptedException, RunningBuffer.RunEnded {
    List<BufferEvent> events = batch.events();
    Set<Integer> left;
    try (Connection c = context.dataSource().getConnection()) {
      left = BufferStatements.remaining(c, buffer.table, ids(events));
      if (left.size() < events.size()) {
        if (!awaitEnded(c, BufferStatements.runningTransactions(c))) {
          return Optional.empty();
        }
        List<Integer> missing = new ArrayList<>();
        for (int i = 0; i < events.size(); i++) {
          if (!left.contains(i)) {
            missing.add(i);
          }
        }
        List<Object> missingIds = new ArrayList<>(missing.size());
        missing.forEach(i -> missingIds.add(id(events.get(i))));
        BufferStatements.remaining(c, buffer.table, missingIds)
            .forEach(i -> left.add(missing.get(i)));
      }
    }
    List<BufferEvent> out = new ArrayList<>();
    for (int i = 0; i < events.size(); i++) {
      if (left.contains(i)) {
        out.add(events.get(i));
      }
    }
    return Optional.of(out);
  }

  /**
   * Waits, within {@link #VISIBILITY_WAIT}, for these transactions to end; false when some had not.
   *
   * @throws RunningBuffer.RunEnded when the run must end meanwhile (stopping, or STOP)
   */
  private boolean awaitEnded(Connection c, List<Long> transactions)
      throws SQLException, InterruptedException, RunningBuffer.RunEnded {
    if (transactions.isEmpty()) {
      return true;
    }
    long until = System.nanoTime() + VISIBILITY_WAIT.toNanos();
    while (BufferStatements.anyRunning(c, transactions)) {
      Optional<Outcome> end = context.checkpoint();
      if (end.isPresent()) {
        throw new RunningBuffer.RunEnded(end.get());
      }
      if (System.nanoTime() >= until) {
        return false;
      }
      Thread.sleep(VISIBILITY_CHECK_EVERY.toMillis());
    }
    return true;
  }

  private List<BufferEvent> succeeded(BulkHandler.Result result, List<BufferEvent> pending) {
    if (result instanceof BulkHandler.Result.Success) {
      return pending;
    }
    if (result instanceof BulkHandler.Result.Partial p) {
      Set<Object> ok = new HashSet<>();
      p.succeededIds().forEach(id -> ok.add(comparable(id)));
      List<BufferEvent> out = new ArrayList<>();
      for (BufferEvent e : pending) {
        if (ok.contains(comparable(id(e)))) {
          out.add(e);
        }
      }
      return out;
    }
    return List.of();
  }

  /** Deletes (and archives) handled rows in one statement, its own transaction. */
  private void delete(List<BufferEvent> done) throws SQLException {
    long start = System.nanoTime();
    int deleted;
    try (Connection c = context.dataSource().getConnection()) {
      deleted = BufferStatements.deleteHandled(c, buffer.table, ids(done));
    }
    context.subBatchDone(deleted, System.nanoTime() - start);
    buffer.metrics.handled(done, clock.millis());
  }

  private Outcome exhausted(List<BufferEvent> pending, int attempts, String reason) {
    BufferExhaustedException error =
        new BufferExhaustedException(
            buffer.settings.name(), batch.groupId(), attempts, ids(pending), reason);
    return new Outcome.PermanentFailure(error, EventSerdes.encode(batch.withEvents(pending)));
  }

  /** Waits between attempts, ending early when the worker stops or health says STOP. */
  private Optional<Outcome> waitFor(Duration wait) throws InterruptedException {
    long until = System.nanoTime() + wait.toNanos();
    while (true) {
      Optional<Outcome> end = context.checkpoint();
      long left = until - System.nanoTime();
      if (end.isPresent() || left <= 0) {
        return end;
      }
      Thread.sleep(Math.max(1, Math.min(CHECK_EVERY.toMillis(), left / 1_000_000)));
    }
  }

  /**
   * An id as a handler's answer is matched: by its text, so a handler may answer with another
   * numeric type than it was given; bytea ids by their bytes, as arrays have no value equality.
   */
  private static Object comparable(Object id) {
    return id instanceof byte[] bytes ? ByteBuffer.wrap(bytes) : String.valueOf(id);
  }

  private Object id(BufferEvent e) {
    return e.row().get(buffer.table.idColumn());
  }

  private List<Object> ids(List<BufferEvent> events) {
    List<Object> ids = new ArrayList<>(events.size());
    events.forEach(e -> ids.add(id(e)));
    return ids;
  }

  private static List<BufferEvent> without(List<BufferEvent> all, List<BufferEvent> gone) {
    Set<BufferEvent> g = Collections.newSetFromMap(new IdentityHashMap<>());
    g.addAll(gone);
    List<BufferEvent> out = new ArrayList<>();
    for (BufferEvent e : all) {
      if (!g.contains(e)) {
        out.add(e);
      }
    }
    return out;
  }

  private static String reason(BulkHandler.Result r) {
    if (r instanceof BulkHandler.Result.Partial p) {
      return p.reason();
    }
    if (r instanceof BulkHandler.Result.Retry t) {
      return t.reason();
    }
    if (r instanceof BulkHandler.Result.Reject j) {
      return j.reason();
    }
    return "handled";
  }
}
