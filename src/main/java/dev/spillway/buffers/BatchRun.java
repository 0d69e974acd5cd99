package dev.spillway.buffers;

import dev.spillway.event.BufferBatch;
import dev.spillway.event.BufferEvent;
import dev.spillway.event.EventSerdes;
import dev.spillway.event.ValueText;
import dev.spillway.sink.Outcome;
import dev.spillway.sink.RunContext;
import dev.spillway.sink.SqlErrors;
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
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.Set;
import java.util.stream.IntStream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One run of one batch: keep only the events whose rows are still buffered (a redelivered batch
 * skips what an earlier run finished; a batch replayed from the dead-letter topic keeps all of its
 * events when their rows were deleted as it was dead-lettered, and those still buffered when they
 * were kept, so rows handled since are not handed over again), call the handler, delete what it
 * handled in one statement, and call again for the rest after a backoff, up to {@code max-attempts}
 * calls. What is left then becomes a permanent failure carrying just those events, for the
 * dead-letter topic. A replayed batch paused, or failing on the database, after part of it was
 * handled goes back as just its rest, since no row would tell its next run what was handled.
 */
final class BatchRun {
  private static final Logger log = LoggerFactory.getLogger(BatchRun.class);

  /** How many times one deletion reads the buffer table's columns again when they change. */
  private static final int COLUMN_CHANGES_FOLLOWED = 3;

  private static final String UNDEFINED_COLUMN = "42703";

  /** How many ids a partial answer names that are not in the batch are shown in its reason. */
  private static final int UNKNOWN_IDS_SHOWN = 5;

  /** How long a run waits for the transactions that may have inserted rows it did not find. */
  static final Duration VISIBILITY_WAIT = Duration.ofSeconds(5);

  private static final Duration VISIBILITY_CHECK_EVERY = Duration.ofMillis(10);

  private final RunningBuffer buffer;
  private final BufferBatch batch;
  private final String retryKey;

  /** Replayed from the dead-letter topic: not timed from its insert. */
  private final boolean replayed;

  /**
   * Replayed with rows that may be gone (deleted as it was dead-lettered): handed over whole and
   * archived from its events, since no row tells what is left to hand over.
   */
  private final boolean fromEvents;

  private final RunContext context;
  private final Clock clock;

  /** The events not handled yet; null until the run knows which are buffered. */
  private List<BufferEvent> pending;

  /**
   * @param retryKey what the batch's retries are remembered by between runs
   * @param replayed whether the batch was handed over again from the dead-letter topic
   * @param fromEvents whether it is a replayed batch whose rows may be gone
   */
  BatchRun(
      RunningBuffer buffer,
      BufferBatch batch,
      String retryKey,
      boolean replayed,
      boolean fromEvents,
      RunContext context,
      Clock clock) {
    this.buffer = buffer;
    // Handed over from its events, a row batched twice (capture published it twice, or it was
    // replaced under its key) would go to the handler and the archive twice: the table no longer
    // has it to read once.
    this.batch = fromEvents ? batch.withEvents(onePerRow(batch.events())) : batch;
    this.retryKey = retryKey;
    this.replayed = replayed;
    this.fromEvents = fromEvents;
    this.context = context;
    this.clock = clock;
  }

  Outcome run() throws SQLException, InterruptedException {
    try {
      return runToEnd();
    } catch (RunningBuffer.RunEnded e) {
      // Stopping, STOP or a limit between steps: what earlier calls handled is deleted, the rest
      // runs again later.
      if (partlyHandledReplay() && e.outcome instanceof Outcome.Paused p) {
        return new Outcome.Paused(p.reason(), rest());
      }
      return e.outcome;
    } catch (SQLException e) {
      // Retried or dead-lettered as the record stands, a replayed batch would take its handled
      // events along; its rest goes back instead, and fails the usual way if it fails again.
      if (partlyHandledReplay()) {
        return new Outcome.Paused(
            "a database error after part of the batch was handled: " + e.getMessage(), rest());
      }
      // Dead-lettered, now or once its retries are spent, a batch some of whose rows are gone
      // (handled by this run or an earlier one) leaves just the rest: a replay would hand the
      // others over again. A lock given up at the lock timeout is no failure of the batch's.
      if (!fromEvents
          && pending != null
          && pending.size() < batch.events().size()
          && !SqlErrors.lockNotAvailable(e)) {
        return SqlErrors.classify(e, rest());
      }
      throw e;
    }
  }

  /** Whether this is a batch handed over from its events some of which this run has handled. */
  private boolean partlyHandledReplay() {
    return fromEvents && pending != null && pending.size() < batch.events().size();
  }

  private byte[] rest() {
    return EventSerdes.encode(batch.withEvents(pending));
  }

  private Outcome runToEnd() throws SQLException, InterruptedException, RunningBuffer.RunEnded {
    checkpoint();
    Optional<RunningBuffer.Retrying> before = buffer.retrying(retryKey);
    if (before.isPresent() && before.get().stage() == RunningBuffer.Stage.DEAD_LETTERED) {
      return deleteDeadLettered(before.get().handled());
    }
    Optional<List<BufferEvent>> buffered = toHandle();
    if (buffered.isEmpty()) {
      return new Outcome.LimitReached(0, "rows whose inserting transaction is not yet visible");
    }
    pending = buffered.get();
    if (replayed && !fromEvents) {
      int rows = comparableIds(batch.events()).size();
      if (pending.size() < rows) {
        log.info(
            "Replayed batch {} of buffer {}: {} of its {} kept rows are still in the table and"
                + " handed over; the others were handled or deleted since",
            retryKey,
            buffer.settings.name(),
            pending.size(),
            rows);
      }
    }
    if (pending.isEmpty()) {
      buffer.settled(retryKey);
      return new Outcome.Done(0);
    }
    // An earlier run of the batch that ended between calls: its count goes on, after its wait.
    int first = 1;
    if (before.isPresent()) {
      // Rows its last call took that were not deleted (the run failed there): deleted now, not
      // handed over again.
      List<BufferEvent> owed = taken(pending, before.get().handled());
      if (!owed.isEmpty()) {
        delete(owed);
        pending = without(pending, owed);
        buffer.retrying(retryKey, before.get().deleted());
        if (pending.isEmpty()) {
          buffer.settled(retryKey);
          return new Outcome.Done(context.rows());
        }
      }
      if (before.get().givenUp() || before.get().attempts() >= buffer.settings.maxAttempts()) {
        // Its last call was the last allowed, or was rejected (the run ended deleting what that
        // call took, or Kafka did not take its dead letter): no call more.
        return exhausted(
            pending,
            before.get().attempts(),
            before.get().stage() == RunningBuffer.Stage.REJECTED,
            Objects.requireNonNullElse(before.get().reason(), "no attempt left"));
      }
      first = before.get().attempts() + 1;
      sleep(Duration.ofNanos(Math.max(0, before.get().notBeforeNanos() - System.nanoTime())));
    }
    for (int attempt = first; ; attempt++) {
      if (attempt > first) {
        columnsStillFit();
      }
      paced();
      BulkHandler.Result result =
          buffer.call(
              BulkHandler.Batch.of(
                  buffer.settings.name(),
                  batch.groupId(),
                  attempt,
                  buffer.table().idColumn(),
                  pending),
              this::checkpoint);
      // Counted, with what it took and the wait before the next call, before its rows are
      // deleted: a run that fails there leaves the next to number on, to wait as long, and to
      // delete those rows without calling again.
      List<BufferEvent> done = succeeded(result, pending);
      String reason = done.size() == pending.size() ? null : reason(result);
      long notBefore =
          System.nanoTime()
              + buffer
                  .settings
                  .retryWait(
                      attempt, result instanceof BulkHandler.Result.Retry r ? r.after() : null)
                  .toNanos();
      buffer.retrying(
          retryKey, new RunningBuffer.Retrying(attempt, notBefore, comparableIds(done), reason));
      if (!done.isEmpty()) {
        delete(done);
        pending = without(pending, done);
      }
      if (pending.isEmpty()) {
        buffer.settled(retryKey);
        return new Outcome.Done(context.rows());
      }
      boolean rejected = result instanceof BulkHandler.Result.Reject;
      if (rejected || attempt >= buffer.settings.maxAttempts()) {
        // Forgotten only once its dead letter is written (BufferBatchHandler.deadLettered): should
        // Kafka refuse the letter, the batch's next run calls no more and dead-letters it again.
        buffer.retrying(retryKey, RunningBuffer.Retrying.givenUp(attempt, rejected, reason));
        return exhausted(pending, attempt, rejected, reason);
      }
      buffer.retrying(retryKey, new RunningBuffer.Retrying(attempt, notBefore));
      sleep(Duration.ofNanos(notBefore - System.nanoTime()));
    }
  }

  /**
   * Before a call made again within the run, the check {@link #toHandle} made before its first: a
   * column added to the buffer table (or dropped from the archive) meanwhile fails the run, its
   * rows kept, rather than hand the batch over once more and fail after.
   */
  private void columnsStillFit() throws SQLException {
    if (buffer.table().archive().isEmpty()) {
      return;
    }
    try (Connection c = context.dataSource().getConnection()) {
      buffer.refresh(c, buffer.table());
    }
  }

  /**
   * Ends the run here when the worker stops, health says STOP or a limit is reached. Asked between
   * the slices of every wait (a permit, a backoff, a transaction to end), so it takes no pause: the
   * pause between sub-batches, longer while health says THROTTLE, is taken once per handler call
   * ({@link #paced()}).
   */
  private void checkpoint() throws RunningBuffer.RunEnded {
    endIf(context.mustEnd());
  }

  /** The same, after the pause due between sub-batches: before each handler call. */
  private void paced() throws InterruptedException, RunningBuffer.RunEnded {
    endIf(context.checkpoint());
  }

  private static void endIf(Optional<Outcome> end) throws RunningBuffer.RunEnded {
    if (end.isPresent()) {
      throw new RunningBuffer.RunEnded(end.get());
    }
  }

  /** Sleeps in short slices, with a checkpoint before each. */
  private void sleep(Duration wait) throws InterruptedException, RunningBuffer.RunEnded {
    RunningBuffer.sleep(wait, this::checkpoint);
  }

  /**
   * The events this run hands over: all of a batch replayed from its events, another's those still
   * buffered (empty when that cannot be told yet). With an archive table and events to hand over,
   * the columns of both tables are then checked on the same connection ({@link
   * RunningBuffer#refresh}): a batch that could not be archived fails before its handler is called,
   * its rows kept.
   */
  private Optional<List<BufferEvent>> toHandle()
      throws SQLException, InterruptedException, RunningBuffer.RunEnded {
    BufferTable t = buffer.table();
    if (fromEvents && t.archive().isEmpty()) {
      return Optional.of(batch.events());
    }
    try (Connection c = context.dataSource().getConnection()) {
      Optional<List<BufferEvent>> events =
          fromEvents ? Optional.of(batch.events()) : stillBuffered(c);
      events.ifPresent(e -> pending = e); // known before the check below can fail
      if (t.archive().isPresent() && events.map(e -> !e.isEmpty()).orElse(false)) {
        buffer.refresh(c, t);
      }
      return events;
    }
  }

  /**
   * The batch's events whose rows are still in the table; empty when that cannot be told yet.
   *
   * <p>A row not found was deleted (by an earlier run of the batch, or by the application), or was
   * inserted by a transaction capture has read but that is not yet visible to other sessions: its
   * commit is in the WAL before the transaction has ended, and on a busy server (or one waiting for
   * a synchronous standby) that gap is long enough for the batch to get here. So rows not found are
   * looked up again once their inserting transactions have ended (a transaction releases the lock
   * on its id only once it is visible); if one has not after {@link #VISIBILITY_WAIT}, the run ends
   * and the batch comes back later. A row a snapshot read was visible then: not found, it was
   * deleted.
   */
  private Optional<List<BufferEvent>> stillBuffered(Connection c)
      throws SQLException, InterruptedException, RunningBuffer.RunEnded {
    List<BufferEvent> events = batch.events();
    Set<Integer> there = BufferStatements.remaining(c, buffer.table(), ids(events));
    List<Integer> missing =
        IntStream.range(0, events.size())
            .filter(i -> !there.contains(i) && events.get(i).lsn() >= 0) // not snapshot reads
            .boxed()
            .toList();
    if (!missing.isEmpty()) {
      if (!awaitEnded(c, inserting(c, missing.stream().map(events::get).toList()))) {
        return Optional.empty();
      }
      List<Object> missingIds = missing.stream().map(i -> id(events.get(i))).toList();
      BufferStatements.remaining(c, buffer.table(), missingIds)
          .forEach(i -> there.add(missing.get(i)));
    }
    // A row inserted while a snapshot read its table can come twice: as its insert and as a read;
    // and a row replaced under its key (a DELETE, then an INSERT) as two inserts. The last event
    // of a key is the row the table holds now, the one deleted after.
    Set<Object> once = new HashSet<>();
    List<BufferEvent> last = new ArrayList<>();
    for (int i = events.size() - 1; i >= 0; i--) {
      if (there.contains(i) && once.add(comparable(id(events.get(i))))) {
        last.add(events.get(i));
      }
    }
    Collections.reverse(last);
    return Optional.of(last);
  }

  /**
   * The transactions that inserted these events' rows. An event an earlier version captured does
   * not say which: every transaction running now stands in for it.
   */
  private static List<Long> inserting(Connection c, List<BufferEvent> events) throws SQLException {
    Set<Long> ids = new HashSet<>();
    for (BufferEvent e : events) {
      if (e.txId() == 0) {
        return BufferStatements.runningTransactions(c);
      }
      ids.add(e.txId());
    }
    return List.copyOf(ids);
  }

  /**
   * Waits, within {@link #VISIBILITY_WAIT}, for these transactions to end; false when some had not.
   */
  private boolean awaitEnded(Connection c, List<Long> transactions)
      throws SQLException, InterruptedException, RunningBuffer.RunEnded {
    long until = System.nanoTime() + VISIBILITY_WAIT.toNanos();
    while (!transactions.isEmpty() && BufferStatements.anyRunning(c, transactions)) {
      checkpoint();
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

  /**
   * The run of a batch dead-lettered by its last run, which failed deleting its rows ({@code
   * on-exhausted: delete}). It deletes those rows and does no more: the batch is neither handed
   * over nor dead-lettered again. A lock given up waits as any does; another failure that may pass
   * tries again later; one that will not (a trigger refusing deletes) leaves the rows in the table.
   */
  private Outcome deleteDeadLettered(Set<Object> ids) throws SQLException {
    try (Connection c = context.dataSource().getConnection()) {
      BufferStatements.deleteExhausted(c, buffer.table(), ids);
    } catch (SQLException e) {
      if (SqlErrors.lockNotAvailable(e)) {
        throw e;
      }
      if (!(SqlErrors.classify(e) instanceof Outcome.PermanentFailure)) {
        return new Outcome.LimitReached(
            0, "deleting the rows of its dead-lettered events failed: " + e.getMessage());
      }
      log.warn(
          "Buffer {}: the rows of dead-lettered batch {} stay in table {}: deleting them failed"
              + " ({})",
          buffer.settings.name(),
          batch.groupId(),
          buffer.table().table().displayName(),
          e.getMessage());
    }
    buffer.settled(retryKey);
    return new Outcome.Done(0);
  }

  /**
   * Deletes (and archives) handled rows in one statement, its own transaction. A replayed batch's
   * rows deleted at dead-lettering are archived from its events.
   */
  private void delete(List<BufferEvent> done) throws SQLException {
    int deleted;
    long nanos;
    try (Connection c = context.dataSource().getConnection()) {
      long start = System.nanoTime(); // the pool's wait is Spillway's, not the database's
      deleted = deleteFollowingColumns(c, done);
      nanos = System.nanoTime() - start;
    }
    context.subBatchDone(deleted, nanos);
    buffer.metrics.handled(done, clock.millis(), replayed);
  }

  /**
   * The archive statements name every column of the buffer table, and delete nothing when its
   * columns are no longer those: they are read again and the statement runs again, a few times at
   * most. A column dropped or renamed makes PostgreSQL refuse the statement, which is taken the
   * same way; when the archive table is the one that lost it, the run fails naming the column.
   */
  private int deleteFollowingColumns(Connection c, List<BufferEvent> done) throws SQLException {
    for (int tries = 1; ; tries++) {
      BufferTable t = buffer.table();
      OptionalInt deleted;
      try {
        deleted =
            fromEvents && t.archive().isPresent()
                ? BufferStatements.deleteHandledReplayed(
                    c, t, ids(done), done.stream().map(BufferEvent::row).toList())
                : BufferStatements.deleteHandled(c, t, ids(done));
      } catch (SQLException e) {
        if (!UNDEFINED_COLUMN.equals(e.getSQLState())
            || tries >= COLUMN_CHANGES_FOLLOWED
            || !buffer.refresh(c, t)) {
          throw e;
        }
        continue;
      }
      if (deleted.isPresent()) {
        return deleted.getAsInt();
      }
      if (tries >= COLUMN_CHANGES_FOLLOWED) {
        throw new SQLException(
            "Buffer "
                + buffer.settings.name()
                + ": the columns of table "
                + t.table().displayName()
                + " kept changing while handled rows were archived",
            "55000");
      }
      buffer.refresh(c, t);
    }
  }

  private Outcome exhausted(
      List<BufferEvent> pending, int attempts, boolean rejected, String reason) {
    BufferExhaustedException error =
        new BufferExhaustedException(
            buffer.settings.name(), batch.groupId(), attempts, rejected, ids(pending), reason);
    return new Outcome.PermanentFailure(error, EventSerdes.encode(batch.withEvents(pending)));
  }

  /**
   * An id as a handler's answer is matched: by its text, so a handler may answer with another
   * numeric type than it was given; bytea ids by their bytes, as arrays have no value equality.
   */
  private static Object comparable(Object id) {
    return id instanceof byte[] bytes ? ByteBuffer.wrap(bytes) : String.valueOf(id);
  }

  private Object id(BufferEvent e) {
    return e.row().get(buffer.table().idColumn());
  }

  private List<Object> ids(List<BufferEvent> events) {
    List<Object> ids = new ArrayList<>(events.size());
    events.forEach(e -> ids.add(id(e)));
    return ids;
  }

  /**
   * The events, the last of each id only, in their order: the last is the row as it was deleted (a
   * row replaced under its key came as two inserts). Events without the id column are all kept.
   */
  private List<BufferEvent> onePerRow(List<BufferEvent> events) {
    Set<Object> seen = new HashSet<>();
    List<BufferEvent> out = new ArrayList<>(events.size());
    for (int i = events.size() - 1; i >= 0; i--) {
      BufferEvent e = events.get(i);
      Object id = id(e);
      if (id == null || seen.add(comparable(id))) {
        out.add(e);
      }
    }
    if (out.size() == events.size()) {
      return events;
    }
    Collections.reverse(out);
    return out;
  }

  private Set<Object> comparableIds(List<BufferEvent> events) {
    Set<Object> ids = new HashSet<>();
    events.forEach(e -> ids.add(comparable(id(e))));
    return ids;
  }

  /** The events whose ids are among these, as {@link #comparableIds} gives them. */
  private List<BufferEvent> taken(List<BufferEvent> events, Set<Object> ids) {
    if (ids.isEmpty()) {
      return List.of();
    }
    return events.stream().filter(e -> ids.contains(comparable(id(e)))).toList();
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

  /**
   * Why a call left events pending. A partial answer naming ids that are not in the batch (another
   * spelling of a key, the receiver's own ids) says so: the rows it meant stay pending.
   */
  private String reason(BulkHandler.Result r) {
    if (r instanceof BulkHandler.Result.Partial p) {
      Set<Object> inBatch = new HashSet<>();
      batch.events().forEach(e -> inBatch.add(comparable(id(e))));
      List<String> unknown =
          p.succeededIds().stream()
              .filter(id -> !inBatch.contains(comparable(id)))
              .map(ValueText::of)
              .toList();
      if (unknown.isEmpty()) {
        return p.reason();
      }
      return p.reason()
          + " (the answer also named "
          + unknown.size()
          + " id(s) not in the batch, ignored: "
          + String.join(", ", unknown.subList(0, Math.min(UNKNOWN_IDS_SHOWN, unknown.size())))
          + (unknown.size() > UNKNOWN_IDS_SHOWN ? ", …" : "")
          + ")";
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
