package dev.spillway.lfk;

import dev.spillway.event.CleanupBatch;
import dev.spillway.event.EventSerdes;
import dev.spillway.event.TableName;
import dev.spillway.jdbc.Transactions;
import dev.spillway.sink.BatchHandler;
import dev.spillway.sink.Outcome;
import dev.spillway.sink.RunContext;
import dev.spillway.sink.SinkRecord;
import dev.spillway.sink.Target;
import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Runs a cleanup batch through the sink: for every loose foreign key of the batch's parent table,
 * child rows referencing the deleted ids are deleted or updated in statements of at most the
 * definition's limit, first skipping locked rows, then waiting for them. Each statement commits on
 * its own. A run ends early at the per-run delete or update limit (GitLab's 100,000 and 50,000),
 * the runtime limit, a STOP of the child table's database, or shutdown; the batch then runs again
 * later and finds only what is left.
 *
 * <p>Ids whose key the parent table holds again are left out: their children are the live row's.
 * The batch's ids are looked up in the parent table once, to count those ({@code
 * spillway_lfk_reinserted_parents}), and each statement passes over any inserted since (see {@link
 * CleanupStatements}). Both run with row security off: a table whose row-level security applies to
 * Spillway's role fails the batch (a permanent failure: dead-lettered) rather than letting a policy
 * make a live parent look deleted or hide children; start-up refuses such tables ({@link
 * DefinitionCheck}).
 */
final class LfkCleanup implements BatchHandler {
  private final Map<TableName, List<Child>> byParent = new LinkedHashMap<>();
  private static final Logger log = LoggerFactory.getLogger(LfkCleanup.class);
  private static final int PARENT_LOOKUP_TIMEOUT_SECONDS = 30;

  /** How long a run waits for parent deletes capture read before they were visible. */
  static final Duration VISIBILITY_WAIT = Duration.ofSeconds(5);

  /** The first pause between looks at those deletes; it doubles up to the second. */
  private static final Duration VISIBILITY_CHECK_FIRST = Duration.ofMillis(20);

  private static final Duration VISIBILITY_CHECK_MAX = Duration.ofMillis(250);
  private final LfkSettings settings;
  private final LfkMetrics metrics;

  private record Child(CheckedKey key, CleanupStatements sql, Target target, int limit) {}

  LfkCleanup(List<CheckedKey> keys, LfkSettings settings, LfkMetrics metrics) {
    this.settings = settings;
    this.metrics = metrics;
    for (CheckedKey k : keys) {
      byParent
          .computeIfAbsent(k.key().parent(), p -> new ArrayList<>())
          .add(
              new Child(
                  k,
                  new CleanupStatements(k),
                  new Target(k.childDatabase(), k.key().child()),
                  settings.statementLimit(k.key())));
    }
  }

  @Override
  public Optional<Target> target(SinkRecord record) {
    CleanupBatch batch = EventSerdes.decodeCleanupBatch(record.value());
    List<Child> children = byParent.getOrDefault(batch.table(), List.of());
    return Optional.of(
        children.isEmpty()
            ? new Target(batch.database(), batch.table())
            : children.get(0).target());
  }

  @Override
  public Outcome execute(SinkRecord record, RunContext context) throws Exception {
    CleanupBatch batch = EventSerdes.decodeCleanupBatch(record.value());
    List<Child> children = byParent.getOrDefault(batch.table(), List.of());
    if (children.isEmpty()) {
      // Its definitions went while its deletes were on their way (or a mistake hides them): taken
      // as done, its children would stay for good; a dead letter waits for them to return.
      return new Outcome.PermanentFailure(
          new IllegalStateException(
              "No loose foreign key of this configuration has "
                  + batch.table()
                  + " as its parent; nothing was cleaned. Once one has, bin/spillway replay lfk"
                  + " hands the batch back."),
          null);
    }
    Lookup ids = stillDeleted(batch, children, context);
    if (ids.ended() != null) {
      return ids.ended();
    }
    Counts counts = new Counts();
    for (Child child : children) {
      Optional<Outcome> ended = clean(ids.deleted(), child, context, counts);
      if (ended.isPresent()) {
        return ended.get();
      }
    }
    if (!ids.deleting().isEmpty()) {
      // Run again later, when those deletes can be told from keys that are back: what this run
      // cleaned its statements then find done.
      return new Outcome.LimitReached(
          counts.deletes + counts.updates,
          ids.deleting().size()
              + " deleted parent row(s) whose delete is not visible yet (its transaction still"
              + " running)");
    }
    metrics.processed(batch.database(), batch.table(), batch.ids().size());
    return new Outcome.Done(counts.deletes + counts.updates);
  }

  @Override
  public void requeued(SinkRecord record, int attempts, boolean delayed) {
    CleanupBatch batch = EventSerdes.decodeCleanupBatch(record.value());
    // Either, as GitLab counts them: a delayed batch's attempts start again rather than grow.
    if (delayed) {
      metrics.rescheduled(batch.database(), batch.table(), batch.ids().size());
    } else {
      metrics.incremented(batch.database(), batch.table(), batch.ids().size());
    }
  }

  private static final class Counts {
    long deletes;
    long updates;
  }

  /**
   * What the parent table says of a batch's ids.
   *
   * @param deleted the ids it has no row for
   * @param deleting the ids whose row a transaction still running deleted
   * @param ended how the run ended while waiting for those (the worker stopping, a STOP), or null
   */
  private record Lookup(List<String> deleted, List<String> deleting, Outcome ended) {}

  /**
   * The batch's ids the parent table has no row for; those it holds again are counted, and their
   * children left alone. A row still there because the transaction that deleted it is not visible
   * yet (capture can read its commit first) is waited for up to {@link #VISIBILITY_WAIT}, then left
   * for a later run: taken for a key that is back, its children would stay for good.
   */
  private Lookup stillDeleted(CleanupBatch batch, List<Child> children, RunContext context)
      throws SQLException, InterruptedException {
    Child first = children.get(0);
    Map<String, Long> deleters = new HashMap<>();
    for (int i = 0; i < batch.ids().size(); i++) {
      deleters.put(batch.ids().get(i), batch.txId(i)); // an id deleted twice: its later delete
    }
    List<String> missing = new ArrayList<>(missingParents(first, batch.ids(), context));
    List<String> there = new ArrayList<>(batch.ids());
    there.removeAll(missing);
    List<String> deleting =
        there.isEmpty() ? List.of() : deletingParents(first, there, deleters, context);
    // A transaction is visible before it lets go of its id: one that ended between the two
    // look-ups is seen by a look-up after the second.
    missing.addAll(settled(first, there, deleting, context));
    long until = System.nanoTime() + VISIBILITY_WAIT.toNanos();
    long pause = VISIBILITY_CHECK_FIRST.toMillis();
    while (!deleting.isEmpty() && System.nanoTime() < until) {
      Optional<Outcome> end = context.mustEnd();
      if (end.isPresent()) {
        return new Lookup(missing, deleting, end.get());
      }
      Thread.sleep(pause);
      pause = Math.min(pause * 2, VISIBILITY_CHECK_MAX.toMillis()); // pg_locks is not free
      List<String> still = deletingParents(first, deleting, deleters, context);
      missing.addAll(settled(first, deleting, still, context));
      deleting = still;
    }
    there.removeAll(missing);
    there.removeAll(deleting);
    if (!there.isEmpty()) {
      metrics.reinserted(batch.database(), batch.table(), there.size());
      log.debug(
          "Leaving the children of {} alone: the table holds their keys again {}",
          batch.table().displayName(),
          there);
    }
    return new Lookup(missing, deleting, null);
  }

  /** Of {@code ids}, those whose parent row is gone, looked up again but for {@code deleting}. */
  private static List<String> settled(
      Child child, List<String> ids, List<String> deleting, RunContext context)
      throws SQLException {
    List<String> look = new ArrayList<>(ids);
    look.removeAll(deleting);
    return look.isEmpty() ? List.of() : missingParents(child, look, context);
  }

  private static List<String> missingParents(Child child, List<String> ids, RunContext context)
      throws SQLException {
    return askParent(
        child, context, c -> child.sql().missingParents(c, ids, PARENT_LOOKUP_TIMEOUT_SECONDS));
  }

  private static List<String> deletingParents(
      Child child, List<String> ids, Map<String, Long> deleters, RunContext context)
      throws SQLException {
    List<Long> transactions = ids.stream().map(deleters::get).toList();
    return askParent(
        child,
        context,
        c -> child.sql().deletingParents(c, ids, transactions, PARENT_LOOKUP_TIMEOUT_SECONDS));
  }

  /** A look-up in the parent's database, row security off (start-up checked it may be). */
  private static List<String> askParent(Child child, RunContext context, ParentQuery query)
      throws SQLException {
    CheckedKey key = child.key();
    Target parent = new Target(key.parentDatabase(), key.key().parent());
    try (Connection c = context.forTarget(parent).dataSource().getConnection()) {
      return Transactions.under(c, Transactions.ROW_SECURITY_OFF, () -> query.ask(c));
    }
  }

  @FunctionalInterface
  private interface ParentQuery {
    List<String> ask(Connection parentDb) throws SQLException;
  }

  /** Cleans one child table; returns the outcome when the run must end before it is clean. */
  private Optional<Outcome> clean(
      List<String> deleted, Child child, RunContext batchContext, Counts counts)
      throws SQLException, InterruptedException {
    RunContext context = batchContext.forTarget(child.target());
    boolean updates = child.key().key().onDelete().updates();
    // Cast to the column's type in the statement, an id the column cannot hold would fail the
    // whole batch; no child refers to it.
    List<String> ids =
        deleted.stream().flatMap(id -> child.key().asColumnValue(id).stream()).toList();
    if (ids.isEmpty()) {
      return Optional.empty(); // nothing this column can hold: no pause, no statement
    }
    for (boolean skipLocked : new boolean[] {true, false}) {
      boolean cleanedNone = false; // the last statement of the pass
      while (true) {
        Optional<Outcome> end = context.checkpoint();
        if (end.isPresent()) {
          return end;
        }
        Optional<Outcome> limit = limitReached(counts);
        if (limit.isPresent()) {
          return limit;
        }
        if (!child.sql().checksParent()) {
          // The parent is in another database: ask it again before each statement.
          ids = missingParents(child, ids, context);
        }
        if (ids.isEmpty()) {
          return Optional.empty();
        }
        int n = context.subBatchSize(child.limit());
        Statement done = run(context, child, ids, skipLocked, n);
        int modified = done.modified();
        context.subBatchDone(modified, done.nanos());
        if (updates) {
          counts.updates += modified;
          metrics.updates(child.target().database(), child.target().table(), modified);
        } else {
          counts.deletes += modified;
          metrics.deletions(child.target().database(), child.target().table(), modified);
        }
        // The pass ends when none are left, or when two statements in a row cleaned none of
        // what they took: a trigger or rule keeps those rows. (One alone may have found the
        // parents of all it waited for inserted again; the next takes other ids' rows. In the
        // skip-locked pass a statement takes what it cleans.)
        if (done.taken() < n || (done.modified() == 0 && cleanedNone)) {
          break;
        }
        cleanedNone = done.modified() == 0;
      }
    }
    return Optional.empty();
  }

  private Optional<Outcome> limitReached(Counts counts) {
    if (counts.deletes >= settings.maxDeletesPerRun()) {
      return Optional.of(
          new Outcome.LimitReached(
              counts.deletes + counts.updates, settings.maxDeletesPerRun() + " deletes per run"));
    }
    if (counts.updates >= settings.maxUpdatesPerRun()) {
      return Optional.of(
          new Outcome.LimitReached(
              counts.deletes + counts.updates, settings.maxUpdatesPerRun() + " updates per run"));
    }
    return Optional.empty();
  }

  /**
   * What one cleanup statement did: the rows it took to clean (locked; the pass goes on while a
   * statement takes its limit and modifies some) and those it modified.
   *
   * @param nanos how long the database took: the connection's wait for the pool and the lock
   *     statement's wait for the application's rows left out (the locks indicator tells of those,
   *     of their own table; as latency they would slow every table of the database)
   */
  private record Statement(int taken, int modified, long nanos) {}

  /**
   * One cleanup statement, and in the blocking pass the locking of its rows before it: the rows
   * others held are waited for first, so the statement that cleans them, in the same transaction,
   * sees what those sessions committed (a parent inserted again) and leaves their rows.
   */
  private static Statement run(
      RunContext context, Child child, List<String> ids, boolean skipLocked, int limit)
      throws SQLException {
    CleanupStatements sql = child.sql();
    try (Connection c = context.dataSource().getConnection();
        PreparedStatement clean = c.prepareStatement(sql.sql())) {
      long start = System.nanoTime();
      long[] lockWait = {0};
      Array array = c.createArrayOf("text", ids.toArray());
      sql.bind(clean, array, limit);
      int[] done =
          Transactions.under(
              c,
              Transactions.ROW_SECURITY_OFF_READ_COMMITTED,
              () -> {
                if (skipLocked) {
                  int modified = clean.executeUpdate();
                  return new int[] {modified, modified};
                }
                int locked;
                long locking = System.nanoTime();
                try (PreparedStatement lock = c.prepareStatement(sql.lockSql())) {
                  sql.bindLock(lock, array, limit);
                  try (ResultSet rs = lock.executeQuery()) {
                    rs.next();
                    locked = rs.getInt(1);
                  }
                }
                lockWait[0] = System.nanoTime() - locking;
                return new int[] {locked, locked == 0 ? 0 : clean.executeUpdate()};
              });
      return new Statement(done[0], done[1], System.nanoTime() - start - lockWait[0]);
    }
  }
}
