package dev.spillway.lfk;

import dev.spillway.event.DeletedRecord;
import dev.spillway.event.EventSerdes;
import dev.spillway.event.TableName;
import dev.spillway.jdbc.Transactions;
import dev.spillway.sink.SqlErrors;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import javax.sql.DataSource;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;

/**
 * Finds parent rows deleted without their children being cleaned up: child rows, still to be
 * cleaned, that refer to a parent row which no longer exists, such as deletes made while capture
 * could not read them (its replication slot lost or dropped). Each loose foreign key's child column
 * is read a chunk of distinct values at a time, in order, through its index, and the parent's
 * primary (never a standby) is asked which of them it lacks. An id counts as deleted only when the
 * parent still lacks it at a second look, taken once every transaction of its database begun before
 * the first has ended and {@code recheckAfter} more has passed, so a parent whose transaction had
 * not committed yet is not taken for a deleted one. Found ids are handed to the cleanup as deleted
 * records, on the topic capture writes, so the pipeline cleans them like any captured delete: in
 * batches, behind the health gates, idempotently. The sweep's own statements are short, and it
 * rests as long as each took before the next.
 */
public final class OrphanSweep {
  /**
   * A parent table, in the database holding it, with the key column children refer to, which the
   * deleted records it hands over carry alone.
   */
  public record Parent(String database, TableName table, String keyColumn) {}

  /**
   * What the sweep found for one loose foreign key.
   *
   * @param referred distinct values of the child column read, among rows still to be cleaned
   * @param unreadable how many of them are no value of the parent's key type, so no parent's
   * @param deleted how many of them refer to a parent row that is gone
   * @param left how many of them referred to no parent row but are not what cleanup asks the child
   *     column for, so it would leave them and each sweep would find them again: a text child's
   *     trailing spaces of its own against a {@code character(n)} key, which drops them
   */
  public record Finding(CheckedKey key, long referred, long unreadable, long deleted, long left) {
    /** False when the key was not read, for the reason it gives. */
    public boolean swept() {
      return key.unsweepable().isEmpty();
    }
  }

  /**
   * Everything the sweep found.
   *
   * @param deleted per parent table, the child values referring to its rows that are gone
   */
  public record Result(List<Finding> findings, Map<Parent, List<String>> deleted) {
    public Result {
      findings = List.copyOf(findings);
      Map<Parent, List<String>> copy = new LinkedHashMap<>();
      deleted.forEach((p, ids) -> copy.put(p, List.copyOf(ids)));
      deleted = Collections.unmodifiableMap(copy);
    }

    public long deletedCount() {
      return deleted.values().stream().mapToLong(List::size).sum();
    }
  }

  /** How the sweep waits {@code recheckAfter} before its second look; tests act in between. */
  @FunctionalInterface
  public interface Pause {
    void pause(Duration d) throws InterruptedException;
  }

  /** Deleted records a hand-over sent, and how many of them Kafka refused. */
  public record HandOver(long sent, long failed, String firstError) {}

  /** Thrown when the second look cannot be taken safely; nothing was handed over. */
  public static final class SweepException extends RuntimeException {
    SweepException(String message) {
      super(message);
    }
  }

  /** How long the second look waits for transactions open at the first to end. */
  static final Duration TRANSACTIONS_WAIT = Duration.ofMinutes(5);

  /** How long one statement of the sweep may run. */
  private static final int STATEMENT_TIMEOUT_SECONDS = 60;

  /** SQLSTATE of a statement cancelled, as at its timeout. */
  private static final String QUERY_CANCELED = "57014";

  /** SQLSTATE class of a value its type does not accept. */
  private static final String DATA_EXCEPTION = "22";

  /** A loose foreign key's first look: what was read and which values lacked a parent. */
  private static final class Look {
    final CheckedKey key;
    final CleanupStatements sql;
    final Set<String> missing = new LinkedHashSet<>();
    long referred;
    long unreadable;
    long left;

    Look(CheckedKey key) {
      this.key = key;
      this.sql = new CleanupStatements(key);
    }

    Parent parent() {
      return new Parent(key.parentDatabase(), key.key().parent(), key.parentPrimaryKey());
    }
  }

  private OrphanSweep() {}

  /**
   * Sweeps the loose foreign keys.
   *
   * @param dataSources Spillway database name → its pool
   * @param chunk distinct child values read, and parent ids asked for, per statement
   * @param recheckAfter how long after the transactions begun before the first look have ended the
   *     sweep looks again at the values it found without a parent
   * @throws SweepException when a parent's database is a standby or its transactions do not end
   */
  public static Result find(
      List<CheckedKey> keys,
      Function<String, DataSource> dataSources,
      int chunk,
      Duration recheckAfter,
      Pause pause)
      throws SQLException, InterruptedException {
    if (chunk < 1) {
      throw new IllegalArgumentException("chunk must be at least 1: " + chunk);
    }
    List<Look> looks = new ArrayList<>();
    for (CheckedKey k : keys) {
      Look look = new Look(k);
      if (k.unsweepable().isEmpty()) {
        firstLook(look, dataSources, chunk);
      }
      looks.add(look);
    }
    Map<Parent, Set<String>> candidates = new LinkedHashMap<>();
    Map<Parent, Look> lookups = new LinkedHashMap<>();
    for (Look look : looks) {
      if (!look.missing.isEmpty()) {
        candidates.computeIfAbsent(look.parent(), p -> new LinkedHashSet<>()).addAll(look.missing);
        lookups.putIfAbsent(look.parent(), look);
      }
    }
    Map<Parent, List<String>> deleted = new LinkedHashMap<>();
    if (!candidates.isEmpty()) {
      for (String db : candidates.keySet().stream().map(Parent::database).distinct().toList()) {
        awaitTransactions(db, dataSources.apply(db));
      }
      pause.pause(recheckAfter);
      for (Map.Entry<Parent, Set<String>> e : candidates.entrySet()) {
        List<String> still =
            secondLook(
                lookups.get(e.getKey()),
                dataSources.apply(e.getKey().database()),
                new ArrayList<>(e.getValue()),
                chunk);
        if (!still.isEmpty()) {
          deleted.put(e.getKey(), inKeyOrder(still));
        }
      }
    }
    List<Finding> findings = new ArrayList<>();
    for (Look look : looks) {
      Set<String> confirmed = new LinkedHashSet<>(deleted.getOrDefault(look.parent(), List.of()));
      findings.add(
          new Finding(
              look.key,
              look.referred,
              look.unreadable,
              look.missing.stream().filter(confirmed::contains).count(),
              look.left));
    }
    return new Result(findings, deleted);
  }

  /**
   * Sends a deleted record for every id found, keyed by parent table as capture keys them, and
   * waits until Kafka has taken or refused each.
   */
  public static HandOver handOver(
      Result result, Producer<byte[], byte[]> producer, String topic, Clock clock)
      throws InterruptedException {
    long nowMillis = clock.millis();
    List<Future<RecordMetadata>> sends = new ArrayList<>();
    for (Map.Entry<Parent, List<String>> e : result.deleted().entrySet()) {
      Parent p = e.getKey();
      byte[] key = p.table().toString().getBytes(StandardCharsets.UTF_8);
      for (String id : e.getValue()) {
        DeletedRecord record =
            new DeletedRecord(
                p.database(), p.table(), Map.of(p.keyColumn(), id), nowMillis * 1000, 0, nowMillis);
        sends.add(producer.send(new ProducerRecord<>(topic, key, EventSerdes.encode(record))));
      }
    }
    producer.flush();
    long failed = 0;
    String firstError = null;
    for (Future<RecordMetadata> send : sends) {
      try {
        send.get();
      } catch (ExecutionException e) {
        failed++;
        if (firstError == null) {
          firstError = String.valueOf(e.getCause().getMessage());
        }
      }
    }
    return new HandOver(sends.size() - failed, failed, firstError);
  }

  /**
   * Ids in the order of their keys as far as their text tells: by value when every one is a number,
   * else by their text (ISO dates and times, uuids).
   */
  static List<String> inKeyOrder(List<String> ids) {
    List<String> sorted = new ArrayList<>(ids);
    try {
      sorted.sort(Comparator.comparing(BigDecimal::new));
    } catch (NumberFormatException notAllNumbers) {
      sorted.sort(Comparator.naturalOrder());
    }
    return sorted;
  }

  private static void firstLook(Look look, Function<String, DataSource> dataSources, int chunk)
      throws SQLException, InterruptedException {
    DataSource childDs = dataSources.apply(look.key.childDatabase());
    DataSource parentDs = dataSources.apply(look.key.parentDatabase());
    String after = null;
    while (true) {
      long started = System.nanoTime();
      List<String> values;
      Missing m;
      try {
        values = references(childDs, look.sql, after, chunk);
        if (values.isEmpty()) {
          return;
        }
        m = missing(look.key.parentDatabase(), parentDs, look.sql, values);
      } catch (SQLException e) {
        throw timedOut(e, look.key);
      }
      look.referred += values.size();
      for (String v : m.values()) {
        // Handed over, it would be asked for as another value, and found again next time.
        if (look.key.asColumnValue(v).filter(v::equals).isPresent()) {
          look.missing.add(v);
        } else {
          look.left++;
        }
      }
      look.unreadable += m.unreadable();
      after = values.get(values.size() - 1);
      restAsLongAsSince(started);
      if (values.size() < chunk) {
        return;
      }
    }
  }

  /** The ids of the first look's parent still missing, asked a chunk at a time. */
  private static List<String> secondLook(Look look, DataSource ds, List<String> ids, int chunk)
      throws SQLException, InterruptedException {
    List<String> still = new ArrayList<>();
    for (int from = 0; from < ids.size(); from += chunk) {
      long started = System.nanoTime();
      List<String> part = ids.subList(from, Math.min(ids.size(), from + chunk));
      try {
        still.addAll(missing(look.key.parentDatabase(), ds, look.sql, part).values());
      } catch (SQLException e) {
        throw timedOut(e, look.key);
      }
      restAsLongAsSince(started);
    }
    return still;
  }

  /** Rests as long as the work since {@code started} took: reads use at most half a connection. */
  private static void restAsLongAsSince(long started) throws InterruptedException {
    TimeUnit.NANOSECONDS.sleep(System.nanoTime() - started);
  }

  /** A statement past its timeout, or a lock wait past its own, as one sentence; others as is. */
  private static SQLException timedOut(SQLException e, CheckedKey key) {
    if (SqlErrors.lockNotAvailable(e)) {
      throw new SweepException(
          "A statement sweeping "
              + key.key().describe()
              + " waited for a lock on its tables past the database's lock-timeout (a schema"
              + " change holding them?); nothing was handed over: sweep again once it is done.");
    }
    if (!QUERY_CANCELED.equals(e.getSQLState())) {
      return e;
    }
    throw new SweepException(
        "A statement sweeping "
            + key.key().describe()
            + " ran over "
            + STATEMENT_TIMEOUT_SECONDS
            + " s and was cancelled (many child rows outside what cleanup acts on between two"
            + " values?); nothing was handed over: sweep it with a smaller --chunk.");
  }

  /**
   * Waits until every transaction of the parent's database begun before now, when every first look
   * has ended, has ended too (prepared ones, whenever begun), so a parent row such a transaction
   * writes, or wrote, is seen by the second look, whichever way it ends. Every session counts but
   * those that write no rows of their own (autovacuum, parallel workers, whose leader counts, WAL
   * senders); one Spillway's role may not see, or whose activity is not tracked, leaves it unable
   * to tell, and it refuses.
   */
  private static void awaitTransactions(String database, DataSource ds)
      throws SQLException, InterruptedException {
    long deadline = System.nanoTime() + TRANSACTIONS_WAIT.toNanos();
    try (Connection c = ds.getConnection();
        Statement s = c.createStatement()) {
      c.setAutoCommit(true);
      s.setQueryTimeout(STATEMENT_TIMEOUT_SECONDS);
      requirePrimary(database, c);
      String began;
      try (ResultSet rs = s.executeQuery("SELECT clock_timestamp()::text")) {
        rs.next();
        began = rs.getString(1);
      }
      // A literal of the server's own clock, read above: polled as a plain statement.
      String open =
          "SELECT count(*) FILTER (WHERE backend_type IS NULL OR state = 'disabled'),"
              + " count(*) FILTER (WHERE xact_start < '"
              + began
              + "'::timestamptz AND backend_type NOT IN"
              + " ('autovacuum worker', 'parallel worker', 'walsender'))"
              + " + (SELECT count(*) FROM pg_prepared_xacts WHERE database = current_database())"
              + " FROM pg_stat_activity WHERE datname = current_database()"
              + " AND pid <> pg_backend_pid()";
      while (true) {
        long hidden;
        long older;
        try (ResultSet rs = s.executeQuery(open)) {
          rs.next();
          hidden = rs.getLong(1);
          older = rs.getLong(2);
        }
        if (hidden > 0) {
          throw new SweepException(
              "Spillway's role may not see the transactions of "
                  + hidden
                  + " sessions of database "
                  + database
                  + " (or track_activities is off for them), so it cannot tell whether one is"
                  + " writing a parent row it would take for a deleted one; nothing was handed"
                  + " over: grant it pg_read_all_stats.");
        }
        if (older == 0) {
          return;
        }
        if (System.nanoTime() > deadline) {
          throw new SweepException(
              older
                  + " transactions of database "
                  + database
                  + " begun before the sweep's first look ended, or prepared, were still open "
                  + TRANSACTIONS_WAIT.toMinutes()
                  + " minutes later, so a parent row they write could be taken for a deleted one;"
                  + " nothing was handed over: sweep again once they have ended (see"
                  + " pg_stat_activity and pg_prepared_xacts).");
        }
        Thread.sleep(200);
      }
    }
  }

  /** A standby may not have the parent's latest rows, nor see the primary's sessions. */
  private static void requirePrimary(String database, Connection c) throws SQLException {
    try (Statement s = c.createStatement();
        ResultSet rs = s.executeQuery("SELECT pg_is_in_recovery()")) {
      rs.next();
      if (rs.getBoolean(1)) {
        throw new SweepException(
            "Database "
                + database
                + " answered from a standby, which may not have the latest parent rows yet; the"
                + " sweep asks the primary: point its url at it (with several hosts, add"
                + " targetServerType=primary).");
      }
    }
  }

  private static List<String> references(
      DataSource ds, CleanupStatements sql, String after, int chunk) throws SQLException {
    try (Connection c = ds.getConnection();
        PreparedStatement ps = c.prepareStatement(sql.references(after))) {
      ps.setQueryTimeout(STATEMENT_TIMEOUT_SECONDS);
      sql.bindReferences(ps, after, chunk);
      return CleanupStatements.strings(ps);
    }
  }

  /** Values without a parent, and how many were no value of the parent's key type at all. */
  private record Missing(List<String> values, long unreadable) {}

  /**
   * Asks the parent's database, with row security off so a policy hiding rows from this role fails
   * rather than making its rows look deleted. A chunk holding a value the key's type refuses is
   * asked value by value, and such values are counted: they refer to no parent.
   */
  private static Missing missing(
      String database, DataSource ds, CleanupStatements sql, List<String> values)
      throws SQLException {
    try (Connection c = ds.getConnection()) {
      // Every time: a pool's connections may reach another server than its first one did.
      requirePrimary(database, c);
      boolean autoCommit = c.getAutoCommit();
      c.setAutoCommit(false);
      try {
        try (Statement s = c.createStatement()) {
          s.execute(Transactions.ROW_SECURITY_OFF);
        }
        try {
          return new Missing(sql.missingParents(c, values, STATEMENT_TIMEOUT_SECONDS), 0);
        } catch (SQLException e) {
          if (!isDataException(e)) {
            throw e;
          }
          c.rollback();
        }
        List<String> out = new ArrayList<>();
        long unreadable = 0;
        for (String v : values) {
          try (Statement s = c.createStatement()) {
            s.execute(Transactions.ROW_SECURITY_OFF);
          }
          try {
            out.addAll(sql.missingParents(c, List.of(v), STATEMENT_TIMEOUT_SECONDS));
          } catch (SQLException e) {
            if (!isDataException(e)) {
              throw e;
            }
            unreadable++;
          }
          c.rollback();
        }
        return new Missing(out, unreadable);
      } finally {
        c.rollback();
        c.setAutoCommit(autoCommit);
      }
    }
  }

  private static boolean isDataException(SQLException e) {
    return e.getSQLState() != null && e.getSQLState().startsWith(DATA_EXCEPTION);
  }
}
