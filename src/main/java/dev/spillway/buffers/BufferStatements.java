package dev.spillway.buffers;

import dev.spillway.event.TableName;
import dev.spillway.event.ValueText;
import dev.spillway.jdbc.Transactions;
import dev.spillway.ops.RowCount;
import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.Set;
import java.util.StringJoiner;

/**
 * Every statement the buffers pipeline runs on a buffer table: catalog look-ups at start-up, then
 * per batch one look-up of what is left and one deletion of what is done. Identifiers come from the
 * configuration, checked against the catalog and quoted; ids are always one array parameter.
 */
final class BufferStatements {
  private BufferStatements() {}

  /** What the catalog says about a buffer table. */
  record Shape(String idColumn, String idType, List<String> columns) {}

  /** The table's columns and its single-column primary key; empty when the table is missing. */
  static Optional<Shape> shape(Connection c, TableName table) throws SQLException {
    List<String> columns = columns(c, table);
    if (columns.isEmpty()) {
      return Optional.empty();
    }
    List<String[]> key = new ArrayList<>();
    try (PreparedStatement ps =
        c.prepareStatement(
            // A type of the system's by its bare name, as the driver maps them (int8, bytea);
            // any other qualified and quoted, so the driver finds it off the search_path and by
            // its exact spelling, and not a type of the same name on the path.
            "SELECT a.attname, CASE WHEN n.nspname = 'pg_catalog' THEN t.typname"
                + " ELSE quote_ident(n.nspname) || '.' || quote_ident(t.typname) END"
                + " FROM pg_index i"
                + " JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)"
                + " JOIN pg_type t ON t.oid = a.atttypid"
                + " JOIN pg_namespace n ON n.oid = t.typnamespace"
                + " WHERE i.indrelid = to_regclass(?) AND i.indisprimary")) {
      ps.setString(1, table.quoted()); // the table, quoted
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) {
          key.add(new String[] {rs.getString(1), rs.getString(2)});
        }
      }
    }
    if (key.size() != 1) {
      return Optional.of(new Shape(null, null, columns));
    }
    return Optional.of(new Shape(key.get(0)[0], key.get(0)[1], columns));
  }

  /**
   * The table's columns whose values capture cannot pass on as text PostgreSQL reads back, with
   * their types, in table order: composite, multirange, geometric and PostGIS types (and domains
   * over them, at any depth) are left out of Debezium's events or come as its own structures, bit
   * strings come as bytes; and arrays of those, or of intervals, money, xml or names, are left out.
   */
  static List<String[]> uncapturable(Connection c, TableName table) throws SQLException {
    return columnsReaching(
        c,
        table,
        "t.typtype IN ('c', 'm') OR t.typname IN ("
            + UNCAPTURED
            + ") OR (r.in_array AND t.typname IN ('interval', 'money', 'xml', 'name'))");
  }

  /**
   * The columns (name, type as written) of a table whose values capture passes on as JSON, which
   * the type's input does not read back ({@code hstore}, alone or in arrays or domains): handed
   * over as such, but no row could be looked up by such a key, nor archived from its events.
   */
  static List<String[]> passedAsJson(Connection c, TableName table) throws SQLException {
    return columnsReaching(c, table, "t.typname = 'hstore'");
  }

  /**
   * The columns of the table, in table order, whose type or a type it leads to (through domains, a
   * domain over a domain included, and arrays' element types) matches {@code condition} on {@code
   * t} (its {@code pg_type}) and {@code r.in_array} (whether it is within an array).
   */
  private static List<String[]> columnsReaching(Connection c, TableName table, String condition)
      throws SQLException {
    List<String[]> out = new ArrayList<>();
    try (PreparedStatement ps =
        c.prepareStatement(
            "WITH RECURSIVE reach (attnum, attname, shown, oid, in_array) AS ("
                + " SELECT attnum, attname, format_type(atttypid, atttypmod), atttypid, false "
                + COLUMNS_OF
                + " UNION ALL SELECT r.attnum, r.attname, r.shown,"
                + " CASE t.typtype WHEN 'd' THEN t.typbasetype ELSE t.typelem END,"
                + " r.in_array OR t.typtype <> 'd'"
                + " FROM reach r JOIN pg_type t ON t.oid = r.oid"
                + " WHERE t.typtype = 'd' OR (t.typcategory = 'A' AND t.typelem <> 0))"
                + " SELECT DISTINCT r.attnum, r.attname, r.shown FROM reach r"
                + " JOIN pg_type t ON t.oid = r.oid WHERE "
                + condition
                + " ORDER BY r.attnum")) {
      ps.setString(1, table.quoted()); // the table, quoted
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) {
          out.add(new String[] {rs.getString(2), rs.getString(3)});
        }
      }
    }
    return out;
  }

  /** The {@code pg_type.typname} a column's type is, through domains (a domain over one too). */
  static String baseType(Connection c, TableName table, String column) throws SQLException {
    try (PreparedStatement ps =
        c.prepareStatement(
            "WITH RECURSIVE reach (oid) AS (SELECT atttypid "
                + COLUMNS_OF
                + " AND attname = ? UNION ALL SELECT t.typbasetype FROM reach r"
                + " JOIN pg_type t ON t.oid = r.oid WHERE t.typtype = 'd')"
                + " SELECT t.typname FROM reach r JOIN pg_type t ON t.oid = r.oid"
                + " WHERE t.typtype <> 'd'")) {
      ps.setString(1, table.quoted());
      ps.setString(2, column);
      try (ResultSet rs = ps.executeQuery()) {
        return rs.next() ? rs.getString(1) : null;
      }
    }
  }

  /** Types capture passes on neither alone nor in arrays, by {@code pg_type.typname}. */
  private static final String UNCAPTURED =
      "'point', 'line', 'lseg', 'box', 'path', 'polygon', 'circle', 'bit', 'varbit', 'geometry',"
          + " 'geography'";

  /** The rows of {@code pg_attribute} of the columns of the table in the next parameter. */
  private static final String COLUMNS_OF =
      "FROM pg_attribute WHERE attrelid = to_regclass(?) AND attnum > 0 AND NOT attisdropped";

  /** Column names in table order; empty when the table does not exist. */
  static List<String> columns(Connection c, TableName table) throws SQLException {
    return columns(c, List.of(table)).get(0);
  }

  /**
   * The column names of each of these tables in table order, read in one statement; a table that
   * does not exist has none.
   */
  static List<List<String>> columns(Connection c, List<TableName> tables) throws SQLException {
    List<List<String>> columns = new ArrayList<>();
    tables.forEach(t -> columns.add(new ArrayList<>()));
    try (PreparedStatement ps =
        c.prepareStatement(
            "SELECT t.n, a.attname FROM unnest(?::text[]) WITH ORDINALITY AS t (name, n)"
                + " JOIN pg_attribute a ON a.attrelid = to_regclass(t.name)"
                + " WHERE a.attnum > 0 AND NOT a.attisdropped ORDER BY t.n, a.attnum")) {
      ps.setArray(1, c.createArrayOf("text", tables.stream().map(TableName::quoted).toArray()));
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) {
          columns.get(rs.getInt(1) - 1).add(rs.getString(2));
        }
      }
    }
    return columns;
  }

  /**
   * Which of these ids still have a row, as positions in {@code ids} counted from 0. Ids are
   * compared as the key's own type in the database, so keys whose text differs from Java's (bytea,
   * floating point) match as they should. With row security off ({@link #rowSecurityActive}): a
   * policy hiding rows fails the look-up rather than make them look handled.
   */
  static Set<Integer> remaining(Connection c, BufferTable t, List<Object> ids) throws SQLException {
    return Transactions.under(c, Transactions.ROW_SECURITY_OFF, () -> lookUp(c, t, ids));
  }

  private static Set<Integer> lookUp(Connection c, BufferTable t, List<Object> ids)
      throws SQLException {
    Set<Integer> out = new HashSet<>();
    try (PreparedStatement ps =
        c.prepareStatement(
            "SELECT u.n - 1 FROM unnest(?) WITH ORDINALITY AS u(id, n) WHERE EXISTS (SELECT 1 FROM "
                + t.table().quoted()
                + " b WHERE b."
                + t.id()
                + " = u.id)")) {
      ps.setArray(1, idArray(c, t.idType(), ids)); // the batch's ids
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) {
          out.add(rs.getInt(1));
        }
      }
    }
    return out;
  }

  /**
   * The transactions with an id running now, prepared ones included: each holds the lock on its own
   * id until it has ended and become visible to everyone.
   */
  static List<Long> runningTransactions(Connection c) throws SQLException {
    List<Long> out = new ArrayList<>();
    try (PreparedStatement ps = c.prepareStatement(Transactions.RUNNING_TRANSACTIONS);
        ResultSet rs = ps.executeQuery()) {
      while (rs.next()) {
        out.add(rs.getLong(1));
      }
    }
    return out;
  }

  /** Whether any of these transactions is still running. */
  static boolean anyRunning(Connection c, List<Long> transactions) throws SQLException {
    try (PreparedStatement ps =
        c.prepareStatement(
            "SELECT EXISTS (SELECT 1 FROM ("
                + Transactions.RUNNING_TRANSACTIONS
                + ") r WHERE r.id = ANY (?))")) {
      ps.setArray(1, c.createArrayOf("int8", transactions.toArray())); // running earlier
      try (ResultSet rs = ps.executeQuery()) {
        rs.next();
        return rs.getBoolean(1);
      }
    }
  }

  /**
   * Deletes handled rows in one statement; with an archive table, the same statement copies them
   * there first, so both happen or neither. Returns the rows deleted, or empty when the buffer
   * table's columns are no longer those {@code t} names (nothing is deleted then).
   */
  static OptionalInt deleteHandled(Connection c, BufferTable t, Collection<Object> ids)
      throws SQLException {
    if (t.archive().isEmpty()) {
      return OptionalInt.of(deleteIds(c, t, ids));
    }
    return Transactions.under(
        c,
        Transactions.ROW_SECURITY_OFF,
        () -> {
          try (PreparedStatement ps = c.prepareStatement(moveToArchive(t) + " " + COUNT_HANDLED)) {
            int i = setSameColumns(c, ps, t);
            ps.setArray(i, idArray(c, t.idType(), ids)); // the handled ids
            return countHandled(ps);
          }
        });
  }

  /**
   * Has PostgreSQL parse and analyze, not run, the statement that moves handled rows to the archive
   * table: it refuses one whose columns cannot take the buffer's (a type with no assignment cast, a
   * generated column) before any batch meets it.
   *
   * @return PostgreSQL's refusal in one line, or empty when it takes the statement
   * @throws SQLException when the database could not be asked
   */
  static Optional<String> archiveRefusal(Connection c, BufferTable t) throws SQLException {
    try (PreparedStatement ps = c.prepareStatement(moveToArchive(t) + " " + COUNT_HANDLED)) {
      ps.getParameterMetaData(); // a describe: parse and analysis only
      return Optional.empty();
    } catch (SQLException e) {
      return SqlBulkHandler.refusal(e, false);
    }
  }

  /**
   * The common table expressions that delete the rows of the ids in the third parameter, when
   * {@code same} holds, and copy them to the archive table ({@code moved}).
   */
  private static String moveToArchive(BufferTable t) {
    return "WITH "
        + sameColumns()
        + ", "
        + deleteReturning(t)
        + ", moved AS ("
        + archiveHandled(t)
        + ")";
  }

  /**
   * {@code same}: whether the buffer table's columns are, in order, those in the first two
   * parameters (the table, the names). The archive statements delete only then, since they name
   * every column: one added since would be left out of the archive.
   */
  private static String sameColumns() {
    return "same AS (SELECT coalesce((SELECT array_agg(attname::text ORDER BY attnum) "
        + COLUMNS_OF
        + ") = ?::text[], false) AS ok)";
  }

  /** Sets the parameters of {@link #sameColumns}; returns the next parameter's index. */
  private static int setSameColumns(Connection c, PreparedStatement ps, BufferTable t)
      throws SQLException {
    ps.setString(1, t.table().quoted()); // the buffer table, quoted
    ps.setArray(2, c.createArrayOf("text", t.columns().toArray())); // its columns as t has them
    return 3;
  }

  private static final String COUNT_HANDLED =
      "SELECT (SELECT ok FROM same), (SELECT count(*) FROM handled)";

  private static OptionalInt countHandled(PreparedStatement ps) throws SQLException {
    try (ResultSet rs = ps.executeQuery()) {
      rs.next();
      return rs.getBoolean(1) ? OptionalInt.of(rs.getInt(2)) : OptionalInt.empty();
    }
  }

  /**
   * {@code handled}: the deletion of the rows of the ids in the next parameter, when {@link
   * #sameColumns} holds.
   */
  private static String deleteReturning(BufferTable t) {
    return "handled AS (DELETE FROM "
        + t.table().quoted()
        + " WHERE "
        + t.id()
        + " = ANY (?) AND (SELECT ok FROM same) RETURNING "
        + t.columnList()
        + ")";
  }

  /** The copy of what {@code handled} deleted to the archive table. */
  private static String archiveHandled(BufferTable t) {
    String columns = t.columnList();
    return "INSERT INTO "
        + t.archive().orElseThrow().quoted()
        + " ("
        + columns
        + ") SELECT "
        + columns
        + " FROM handled";
  }

  /**
   * As {@link #deleteHandled}, for a replayed batch with an archive table: its rows still buffered
   * are moved there, and those gone (deleted when the batch was dead-lettered) are archived from
   * the events' values, which PostgreSQL reads as the buffer table's row type (a column added since
   * the event is null). Only those rows are read from the events, and a row the archive table
   * refuses as conflicting (a unique key it already holds, say from an earlier replay) is left out;
   * a moved row is archived or the statement fails, as in {@link #deleteHandled}. Returns the rows
   * deleted, or empty when the buffer table's columns are no longer those {@code t} names.
   */
  static OptionalInt deleteHandledReplayed(
      Connection c, BufferTable t, List<Object> ids, List<Map<String, Object>> rows)
      throws SQLException {
    String sql =
        moveToArchive(t)
            + ", restored AS (INSERT INTO "
            + t.archive().orElseThrow().quoted()
            + " ("
            + t.columnList()
            + ") SELECT "
            + t.columnList()
            // Cast once per row, and only for rows not found in the buffer table.
            + " FROM (SELECT (v).* FROM (SELECT CAST(u.r AS "
            + t.table().quoted()
            + ") AS v FROM unnest(?, ?::text[]) AS u(id, r) WHERE (SELECT ok FROM same) AND NOT"
            + " EXISTS (SELECT 1 FROM handled h WHERE h."
            + t.id()
            + " = u.id) OFFSET 0) cast_rows) g ON CONFLICT DO NOTHING) "
            + COUNT_HANDLED;
    return Transactions.under(
        c,
        Transactions.ROW_SECURITY_OFF,
        () -> {
          try (PreparedStatement ps = c.prepareStatement(sql)) {
            int i = setSameColumns(c, ps, t);
            Array idArray = idArray(c, t.idType(), ids);
            ps.setArray(i, idArray); // the handled ids
            ps.setArray(i + 1, idArray); // the same, beside their rows
            String[] records =
                rows.stream().map(r -> recordText(t.columns(), r)).toArray(String[]::new);
            ps.setArray(
                i + 2, c.createArrayOf("text", records)); // the handled rows, as events carry them
            return countHandled(ps);
          }
        });
  }

  /** Which of the columns {@code needed} are not among those a table {@code has}. */
  static List<String> lacking(List<String> has, List<String> needed) {
    List<String> missing = new ArrayList<>(needed);
    missing.removeAll(has);
    return missing;
  }

  /**
   * A row as PostgreSQL's text form of a record of these columns: {@code (1,"call",)}, each value
   * quoted, a column the row lacks or holds null as nothing. Values are what capture puts in
   * events: text PostgreSQL reads back, numbers and booleans, {@code bytea} as bytes (written in
   * hex).
   */
  static String recordText(List<String> columns, Map<String, Object> row) {
    StringBuilder out = new StringBuilder("(");
    for (int i = 0; i < columns.size(); i++) {
      if (i > 0) {
        out.append(',');
      }
      Object v = row.get(columns.get(i));
      if (v == null) {
        continue;
      }
      ValueText.appendQuoted(out, ValueText.of(v));
    }
    return out.append(')').toString();
  }

  /** Deletes rows whose events were dead-lettered ({@code on-exhausted: delete}); not archived. */
  static int deleteExhausted(Connection c, BufferTable t, Collection<Object> ids)
      throws SQLException {
    return deleteIds(c, t, ids);
  }

  private static int deleteIds(Connection c, BufferTable t, Collection<Object> ids)
      throws SQLException {
    return Transactions.under(
        c,
        Transactions.ROW_SECURITY_OFF,
        () -> {
          try (PreparedStatement ps =
              c.prepareStatement(
                  "DELETE FROM " + t.table().quoted() + " WHERE " + t.id() + " = ANY (?)")) {
            ps.setArray(1, idArray(c, t.idType(), ids)); // the ids
            return ps.executeUpdate();
          }
        });
  }

  /**
   * Whether row-level security applies to the connection's role on {@code table}: the buffer's
   * statements run with row security off, so that a policy hiding rows fails them rather than makes
   * those rows look handled (never handed over, never deleted), and would fail on it.
   */
  static boolean rowSecurityActive(Connection c, TableName table) throws SQLException {
    try (PreparedStatement ps =
        c.prepareStatement("SELECT coalesce(row_security_active(to_regclass(?)), false)")) {
      ps.setString(1, table.quoted()); // the table, quoted
      try (ResultSet rs = ps.executeQuery()) {
        rs.next();
        return rs.getBoolean(1);
      }
    }
  }

  /**
   * Rows in the buffer table now: counted exactly up to {@link RowCount#EXACT_UP_TO}, so a backlog
   * of millions (a handler down for hours) does not make every status call and metrics scrape read
   * them all; above it, the planner's estimate (kept by autovacuum), and never less than the limit.
   */
  static long rowsWaiting(Connection c, TableName table) throws SQLException {
    try (PreparedStatement ps =
        c.prepareStatement(
            "SELECT CASE WHEN n > ? THEN greatest(n, (SELECT reltuples::bigint FROM pg_class"
                + " WHERE oid = to_regclass(?))) ELSE n END FROM (SELECT count(*) AS n FROM"
                + " (SELECT FROM "
                + table.quoted()
                + " LIMIT ?) l) c")) {
      ps.setLong(1, RowCount.EXACT_UP_TO); // counted exactly up to here
      ps.setString(2, table.quoted()); // the table, quoted
      ps.setLong(3, RowCount.EXACT_UP_TO + 1); // one more tells the limit is passed
      try (ResultSet rs = ps.executeQuery()) {
        rs.next();
        return rs.getLong(1);
      }
    }
  }

  static String quotedList(List<String> columns) {
    StringJoiner j = new StringJoiner(", ");
    columns.forEach(col -> j.add(TableName.quote(col)));
    return j.toString();
  }

  /**
   * Primary keys of type {@code idType} ({@code pg_type.typname} for a system type, else qualified
   * and quoted, as {@link #shape} gives it) as an array parameter.
   */
  static Array idArray(Connection c, String idType, Collection<?> ids) throws SQLException {
    // The driver takes bytea elements only as byte[][], and capture gives bytea keys as byte[]:
    // a domain's over bytea too, whose type is named otherwise.
    boolean bytes =
        "bytea".equals(idType)
            || (!ids.isEmpty() && ids.stream().allMatch(byte[].class::isInstance));
    Object[] elements = bytes ? ids.toArray(new byte[0][]) : ids.toArray();
    return c.createArrayOf(idType, elements);
  }
}
