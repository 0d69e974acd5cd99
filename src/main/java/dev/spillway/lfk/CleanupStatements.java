package dev.spillway.lfk;

import dev.spillway.event.TableName;
import dev.spillway.jdbc.Transactions;
import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Types;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Collectors;

/**
 * The SQL of one loose foreign key: a statement that modifies at most {@code LIMIT} child rows
 * referencing any of the deleted parent ids, in a locking pass that skips locked rows and a
 * blocking pass that waits for them; and, for the sweep, the statements that read which parent ids
 * the child rows still to be cleaned refer to and which of them the parent no longer has.
 * Identifiers come from the checked definitions and are quoted; ids, limits and values are bind
 * parameters. Each cleanup statement is idempotent: once a row is deleted or updated, it no longer
 * matches.
 *
 * <p>A deleted id whose key the parent table holds again (a row inserted anew under it, or deleted
 * and inserted back in one transaction) has no children to clean: they belong to the live row. When
 * the parent lives in the child's database, each cleanup statement itself passes over such ids in
 * its own snapshot, so a parent inserted while a batch runs keeps every child its transaction wrote
 * (rows others hold are locked by {@link #lockSql} before a statement cleans them, which then sees
 * what those sessions committed); for a parent in another database, {@link #missingParents} asks
 * before each statement.
 */
final class CleanupStatements {
  private final CheckedKey key;

  /**
   * What a child row must match besides its column, {@code AND …} each: the target not holding its
   * value yet (update_column_to), and the conditions.
   */
  private final String cleanable;

  private final String skipLocked;
  private final String lock;
  private final String firstReferences;
  private final String nextReferences;
  private final String missingParents;
  private final String deletingParents;
  private final boolean checksParent;

  CleanupStatements(CheckedKey key) {
    this.key = key;
    this.checksParent = key.childDatabase().equals(key.parentDatabase());
    this.cleanable = cleanable(key.key());
    this.skipLocked = build();
    this.lock = lock();
    this.firstReferences = references(false);
    this.nextReferences = references(true);
    this.missingParents = missingParents(key);
    this.deletingParents = deletingParents(key);
  }

  /** The statement that cleans at most {@code LIMIT} rows, passing over rows others hold. */
  String sql() {
    return skipLocked;
  }

  /**
   * The blocking pass's first step: locks at most {@code LIMIT} rows {@link #sql} would clean,
   * waiting for those others hold, and counts them; {@link #sql}, run next in the same transaction,
   * cleans them. Done in one statement, a row waited for would be taken back as its new version
   * with the ids the statement computed before the wait, so a parent inserted by the transaction it
   * waited for would not be seen; the next statement sees it.
   */
  String lockSql() {
    return lock;
  }

  /**
   * Whether {@link #sql} passes over ids the parent table holds again by itself (the parent is in
   * the child's database); when not, the ids must go through {@link #missingParents} first.
   */
  boolean checksParent() {
    return checksParent;
  }

  /**
   * Binds one execution: the value to set (update_column_to), the ids, the value again to skip rows
   * that already hold it, condition values, then the limit. Values go as untyped text, so
   * PostgreSQL gives them the type of the column they meet.
   */
  void bind(PreparedStatement ps, Array ids, int limit) throws SQLException {
    LooseForeignKey k = key.key();
    int i = 1;
    if (k.onDelete() == OnDelete.UPDATE_COLUMN_TO && k.targetValue() != null) {
      ps.setObject(i++, String.valueOf(k.targetValue()), Types.OTHER);
    }
    bindSelect(ps, i, ids, limit);
  }

  /**
   * Binds {@link #lockSql}: the ids, what else a row must match (update_column_to's value, the
   * condition values), then the limit.
   */
  void bindLock(PreparedStatement ps, Array ids, int limit) throws SQLException {
    bindSelect(ps, 1, ids, limit);
  }

  private void bindSelect(PreparedStatement ps, int first, Array ids, int limit)
      throws SQLException {
    int i = first;
    ps.setArray(i++, ids);
    i = bindCleanable(ps, i);
    ps.setInt(i, limit);
  }

  /**
   * The next distinct values, in order and as text, that child rows still to be cleaned hold in the
   * column: those above {@code after}, or the first ones when it is null. Each value is one descent
   * of the column's index to the next greater value (a skip scan), however many rows hold it; the
   * recursion stops at the chunk's {@code LIMIT}.
   */
  String references(String after) {
    return after == null ? firstReferences : nextReferences;
  }

  /**
   * Binds {@link #references}: the value to read after (when given), what else a row must match for
   * the first value and again for each next one, then the chunk size.
   */
  void bindReferences(PreparedStatement ps, String after, int chunk) throws SQLException {
    int i = 1;
    if (after != null) {
      ps.setString(i++, after);
    }
    i = bindCleanable(ps, i);
    i = bindCleanable(ps, i);
    ps.setInt(i, chunk);
  }

  /**
   * Asks the parent's database which of the values (the child's, or deleted ids) the parent table
   * has no row for, compared as the parent's key type: those values, as given, for cleanup casts
   * them back to the child's type.
   *
   * @param timeoutSeconds the statement's timeout, 0 for none
   */
  List<String> missingParents(Connection parentDb, List<String> values, int timeoutSeconds)
      throws SQLException {
    return values(parentDb, missingParents, values, timeoutSeconds);
  }

  /**
   * Of these values (ids whose parent row the table still shows), those whose deleting transaction
   * is still running: a delete capture read before its transaction became visible to other sessions
   * (its commit in the WAL, the session waiting for a synchronous standby, say), which the look-up
   * cannot yet tell from a key that is back.
   *
   * @param transactions for each value, the id of the transaction that deleted it; where 0 (not
   *     known), the one the row's {@code xmax} names, which may also be one that only locks it
   */
  List<String> deletingParents(
      Connection parentDb, List<String> values, List<Long> transactions, int timeoutSeconds)
      throws SQLException {
    try (PreparedStatement ps = parentDb.prepareStatement(deletingParents)) {
      ps.setArray(2, parentDb.createArrayOf("int8", transactions.toArray()));
      return values(parentDb, ps, values, timeoutSeconds);
    }
  }

  /** The values (a text array parameter) a query of the parent's database keeps. */
  private static List<String> values(
      Connection parentDb, String sql, List<String> values, int timeoutSeconds)
      throws SQLException {
    try (PreparedStatement ps = parentDb.prepareStatement(sql)) {
      return values(parentDb, ps, values, timeoutSeconds);
    }
  }

  private static List<String> values(
      Connection parentDb, PreparedStatement ps, List<String> values, int timeoutSeconds)
      throws SQLException {
    ps.setQueryTimeout(timeoutSeconds);
    ps.setArray(1, parentDb.createArrayOf("text", values.toArray()));
    return strings(ps);
  }

  /** The first column of the rows a query returns, as text. */
  static List<String> strings(PreparedStatement ps) throws SQLException {
    List<String> out = new ArrayList<>();
    try (ResultSet rs = ps.executeQuery()) {
      while (rs.next()) {
        out.add(rs.getString(1));
      }
    }
    return out;
  }

  private int bindCleanable(PreparedStatement ps, int first) throws SQLException {
    LooseForeignKey k = key.key();
    int i = first;
    if (k.onDelete() == OnDelete.UPDATE_COLUMN_TO && k.targetValue() != null) {
      ps.setObject(i++, String.valueOf(k.targetValue()), Types.OTHER);
    }
    for (LooseForeignKey.Condition c : k.conditions()) {
      if (c.value() != null) {
        ps.setObject(i++, String.valueOf(c.value()), Types.OTHER);
      }
    }
    return i;
  }

  private static String cleanable(LooseForeignKey k) {
    StringBuilder where = new StringBuilder();
    if (k.onDelete() == OnDelete.UPDATE_COLUMN_TO) {
      String target = TableName.quote(k.targetColumn().orElseThrow());
      where.append(" AND ").append(target);
      where.append(k.targetValue() == null ? " IS NOT NULL" : " IS DISTINCT FROM ?");
    }
    for (LooseForeignKey.Condition c : k.conditions()) {
      where.append(" AND ").append(TableName.quote(c.column()));
      where.append(c.value() == null ? " IS NULL" : " = ?");
    }
    return where.toString();
  }

  /** The child rows to clean, at most {@code LIMIT}, locked: {@code SELECT <what> FROM … }. */
  private String select(String what, boolean skipLocked) {
    return "SELECT "
        + what
        + " FROM "
        + key.key().child().quoted()
        + " WHERE "
        + TableName.quote(key.key().column())
        + " = ANY ("
        + (checksParent ? idsWithoutParent() : "CAST(? AS " + key.columnType() + "[])")
        + ")"
        + cleanable
        + " LIMIT ? FOR UPDATE"
        + (skipLocked ? " SKIP LOCKED" : "");
  }

  private String lock() {
    return "SELECT count(*) FROM (" + select("1", false) + ") AS locked";
  }

  /** The statement that cleans at most {@code LIMIT} rows, passing over those others hold. */
  private String build() {
    LooseForeignKey k = key.key();
    String child = k.child().quoted();
    String pk =
        key.childPrimaryKey().stream().map(TableName::quote).collect(Collectors.joining(", "));
    String column = TableName.quote(k.column());
    String set =
        switch (k.onDelete()) {
          case ASYNC_NULLIFY -> column + " = NULL";
          case UPDATE_COLUMN_TO ->
              TableName.quote(k.targetColumn().orElseThrow())
                  + (k.targetValue() == null ? " = NULL" : " = ?");
          default -> null;
        };
    // A row is its table's and its key's: a table inheriting from the child keeps a primary key
    // of its own, and may hold a row under a key a cleaned row of another table has.
    String row = "tableoid, " + pk;
    String rows = "(" + row + ") IN (" + select(row, true) + ")";
    if (set == null) {
      return "DELETE FROM " + child + " WHERE " + rows;
    }
    return "UPDATE " + child + " SET " + set + " WHERE " + rows;
  }

  private String references(boolean after) {
    String column = "c." + TableName.quote(key.key().column());
    String from = " FROM " + key.key().child().quoted() + " c WHERE " + column;
    String order = " ORDER BY " + column + " LIMIT 1";
    String first =
        after
            ? "SELECT " + column + from + " > CAST(? AS " + key.columnType() + ")"
            : "SELECT " + column + from + " IS NOT NULL";
    String next = "SELECT " + column + from + " > r.v";
    // No ORDER BY outside: the recursion yields the values in order, and one would read them all.
    return "WITH RECURSIVE r(v) AS (("
        + first
        + cleanable
        + order
        + ") UNION ALL SELECT ("
        + next
        + cleanable
        + order
        + ") FROM r WHERE r.v IS NOT NULL) SELECT v::text AS value FROM r WHERE v IS NOT NULL"
        + " LIMIT ?";
  }

  /**
   * The ids (a text array parameter) the parent table has no row for, cast to the child column's
   * type: computed once per statement, before the child's index is read with them.
   */
  private String idsWithoutParent() {
    return "ARRAY(SELECT CAST(u.v AS "
        + key.columnType()
        + ") FROM unnest(CAST(? AS text[])) AS u(v) WHERE "
        + noParent(key)
        + ")";
  }

  /**
   * On a standby (a pool that reached one after a failover) every value counts as missing: a
   * lagging one may still show a deleted parent, and its children would be left for good.
   */
  private static String missingParents(CheckedKey key) {
    return "SELECT u.v FROM unnest(CAST(? AS text[])) AS u(v) WHERE pg_is_in_recovery() OR "
        + noParent(key);
  }

  /**
   * A transaction holds the lock on its own id until it is visible to others. The deleting
   * transaction's id comes with the value (capture read it); where it did not (0), the row's {@code
   * xmax} stands in, which names the transaction that deleted or locked it (unless a multixact).
   */
  private static String deletingParents(CheckedKey key) {
    return "SELECT u.v FROM unnest(CAST(? AS text[]), CAST(? AS int8[])) AS u(v, x) WHERE EXISTS"
        + " (SELECT 1 FROM "
        + key.key().parent().quoted()
        + " p WHERE "
        + parentRow(key)
        + " AND CASE WHEN u.x <> 0 THEN u.x ELSE p.xmax::text::bigint END IN ("
        + Transactions.RUNNING_TRANSACTIONS
        + "))";
  }

  /**
   * That the parent table has no row whose key is {@code u.v} (text), compared as the key's type.
   */
  private static String noParent(CheckedKey key) {
    return "NOT EXISTS (SELECT 1 FROM "
        + key.key().parent().quoted()
        + " p WHERE "
        + parentRow(key)
        + ")";
  }

  /** That parent row {@code p}'s key is {@code u.v} (text), compared as the key's type. */
  private static String parentRow(CheckedKey key) {
    return "p."
        + TableName.quote(key.parentPrimaryKey())
        + " = CAST(u.v AS "
        + key.parentKeyType()
        + ")";
  }
}
