package dev.spillway.lfk;

import dev.spillway.config.ConfigException;
import dev.spillway.event.TableName;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Types;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.Optional;
import java.util.Set;
import java.util.function.Function;
import javax.sql.DataSource;

/**
 * Checks loose-foreign-key definitions against the catalogs of the databases holding their tables,
 * before anything runs: the parent exists and has a one-column primary key (or is partitioned with
 * a key holding {@code id}), the child exists with a primary key, every column named exists, a
 * column set to NULL may hold NULL, and every value written for a column is one its type accepts
 * unchanged. A child column without a valid index is only a warning, with the statement that adds
 * one.
 */
public final class DefinitionCheck {
  /** The checked definitions, and warnings to show. */
  public record Result(List<CheckedKey> keys, List<String> warnings) {}

  /**
   * @param rowSecurity whether row-level security applies to Spillway's role on it (see {@link
   *     #rowSecurity})
   * @param inheritors tables inheriting from it ({@code INHERITS}, not partitions), a few at most
   */
  private record Table(
      long oid,
      boolean partitioned,
      List<String> primaryKey,
      boolean rowSecurity,
      List<String> inheritors) {}

  /**
   * @param type as {@code format_type} gives it, with its modifier: {@code character varying(64)}
   * @param baseType without: {@code character varying}, {@code bpchar} (not {@code character},
   *     which means {@code character(1)}), so a cast to it neither cuts nor rounds
   * @param notNullCheck whether a check constraint of the column alone says {@code IS NOT NULL} (as
   *     GitLab adds one before a column is declared NOT NULL)
   * @param setBySystem why PostgreSQL refuses an UPDATE setting it (a generated column, an identity
   *     one GENERATED ALWAYS), or null
   * @param notNullDomain the domain its type is, or is over, that takes no NULL (declared NOT NULL,
   *     or a check constraint saying {@code IS NOT NULL}), or null
   */
  /**
   * @param type with its modifier ({@code varchar(3)}, a domain's name)
   * @param baseType without its modifier
   * @param rootType the type at the bottom of its domains, without modifier ({@code integer} for a
   *     domain over one): what cleanup reads keys as and compares by
   */
  private record Column(
      int attnum,
      String type,
      String baseType,
      String rootType,
      boolean notNull,
      String category,
      boolean notNullCheck,
      String setBySystem,
      String notNullDomain,
      String collation,
      boolean nondeterministic) {}

  /** SQLSTATE class of invalid input for a type, out-of-range numbers and the like. */
  private static final String DATA_EXCEPTION = "22";

  /** SQLSTATE of an operator (or function) PostgreSQL has none of for the types given. */
  private static final String UNDEFINED_FUNCTION = "42883";

  /** SQLSTATE class of a domain's constraint refusing a value cast to it. */
  private static final String INTEGRITY_CONSTRAINT_VIOLATION = "23";

  private final Function<String, DataSource> dataSources;
  private final Map<String, Optional<Table>> tables = new HashMap<>();

  /** The parents keyed by several columns whose index for look-ups by id was asked about. */
  private final Set<String> parentIndexesAsked = new java.util.HashSet<>();

  private DefinitionCheck(Function<String, DataSource> dataSources) {
    this.dataSources = dataSources;
  }

  /**
   * @param databaseOf table ({@code schema.table}) → the database holding it
   * @throws ConfigException naming the definition and what is wrong with it
   */
  public static Result check(
      List<LooseForeignKey> definitions,
      Function<String, String> databaseOf,
      Function<String, DataSource> dataSources)
      throws SQLException {
    DefinitionCheck check = new DefinitionCheck(dataSources);
    List<CheckedKey> keys = new ArrayList<>();
    List<String> warnings = new ArrayList<>();
    for (LooseForeignKey k : definitions) {
      keys.add(check.one(k, databaseOf, warnings));
    }
    return new Result(List.copyOf(keys), List.copyOf(warnings));
  }

  private CheckedKey one(
      LooseForeignKey k, Function<String, String> databaseOf, List<String> warnings)
      throws SQLException {
    String parentDb = databaseOf.apply(k.parent().toString());
    String childDb = databaseOf.apply(k.child().toString());
    Table parent =
        table(parentDb, k.parent(), k)
            .orElseThrow(
                () ->
                    problem(
                        k,
                        "names parent table "
                            + k.parent().displayName()
                            + ", which does not exist in database "
                            + parentDb));
    if (!parent.inheritors().isEmpty()) {
      // A publication of the parent also holds the tables inheriting from it, but a change of a
      // row stored in one comes under that table's name (only a partitioned table's come as its
      // own), which no route reads: its children would be left for good.
      throw problem(
          k,
          "names parent table "
              + k.parent().displayName()
              + ", which tables inherit from ("
              + String.join(
                  ", ", parent.inheritors().subList(0, Math.min(3, parent.inheritors().size())))
              + (parent.inheritors().size() > 3 ? ", ..." : "")
              + "): a delete of a row stored in one of them is captured under that table's name,"
              + " and its children would never be cleaned; a parent must be a plain or a"
              + " partitioned (PARTITION BY) table");
    }
    Optional<String> referred = LooseForeignKey.referredColumn(parent.primaryKey());
    // A plain table's key of several columns may hold ids repeated under another column (per
    // tenant, say): a deleted one another row still holds would leave its children for good.
    boolean severalUnpartitioned = parent.primaryKey().size() > 1 && !parent.partitioned();
    if (referred.isEmpty() || severalUnpartitioned) {
      throw problem(
          k,
          "needs a parent with a one-column primary key, or a partitioned one whose key holds an"
              + " id column (as GitLab's partitioned tables' id, partition_id), but "
              + k.parent().displayName()
              + (parent.primaryKey().isEmpty()
                  ? " has none"
                  : " has " + String.join(", ", parent.primaryKey()))
              + (referred.isPresent() ? " and is not partitioned" : ""));
    }
    String parentKey = referred.get();
    Table child =
        table(childDb, k.child(), k)
            .orElseThrow(
                () ->
                    problem(
                        k,
                        "names child table "
                            + k.child().displayName()
                            + ", which does not exist in database "
                            + childDb));
    if (child.primaryKey().isEmpty()) {
      throw problem(
          k, "needs a child with a primary key, but " + k.child().displayName() + " has none");
    }
    rowSecurity(k, "parent", k.parent(), parent);
    rowSecurity(k, "child", k.child(), child);
    DataSource ds = dataSource(childDb, k);
    Column column = column(ds, child, k.child(), k.column(), k);
    if (k.onDelete() == OnDelete.ASYNC_NULLIFY) {
      settable(k, k.column(), column, true);
    }
    Integer targetAttnum = null;
    if (k.targetColumn().isPresent()) {
      String name = k.targetColumn().get();
      Column target = column(ds, child, k.child(), name, k);
      targetAttnum = target.attnum();
      settable(k, name, target, k.targetValue() == null);
      fits(ds, k, "target_value", name, target, k.targetValue());
    }
    for (LooseForeignKey.Condition c : k.conditions()) {
      Column condition = column(ds, child, k.child(), c.column(), k);
      fits(ds, k, "condition " + c.column() + " =", c.column(), condition, c.value());
    }
    Indexed columnIndex = indexed(ds, child, column.attnum(), null);
    if (!columnIndex.forCleanup()
        || (targetAttnum != null
            && !indexed(ds, child, column.attnum(), targetAttnum).forCleanup())) {
      warnings.add(indexWarning(k, child));
    }
    Column parentColumn = column(dataSource(parentDb, k), parent, k.parent(), parentKey, k);
    // Asked once for the parent, however many definitions name it.
    if (parent.primaryKey().size() > 1
        && parentIndexesAsked.add(parentDb + "/" + k.parent())
        && !indexed(dataSource(parentDb, k), parent, parentColumn.attnum(), null).forCleanup()) {
      warnings.add(
          k.describe()
              + ": no index on "
              + k.parent().displayName()
              + " starts with "
              + parentKey
              + ", by which cleanup looks up deleted parents, so each look-up scans every"
              + " partition; add one: CREATE INDEX ON "
              + k.parent().quoted()
              + " ("
              + TableName.quote(parentKey)
              + "); (it locks out writes while it builds: on a busy table build one CONCURRENTLY"
              + " on each partition, then CREATE INDEX ON ONLY the parent and attach each with"
              + " ALTER INDEX <the parent's index> ATTACH PARTITION <the partition's index>)");
    }
    if (!cleanable(column, parentColumn)) {
      throw problem(
          k,
          k.column()
              + " is "
              + column.baseType()
              + " and the parent's key "
              + parentColumn.baseType()
              + ", which cleanup cannot compare (it reads each deleted key as "
              + column.rootType()
              + "): give the column "
              + advice(column, parentColumn));
    }
    if (column.nondeterministic()
        && !(childDb.equals(parentDb) && column.collation().equals(parentColumn.collation()))) {
      // Cleanup's = goes by the child's collation: a deleted 'abc' would take the children of a
      // live 'ABC'.
      throw problem(
          k,
          k.column()
              + " compares by collation "
              + column.collation()
              + ", which is not deterministic, and the parent's key "
              + (!childDb.equals(parentDb)
                  ? "is in another database, whose collation of any name may compare otherwise"
                  : parentColumn.collation() == null ? "by none" : "by " + parentColumn.collation())
              + ": cleanup would take the children of keys that differ but compare equal ('ABC'"
              + " and 'abc'); give the column the key's collation");
    }
    Optional<String> unsweepable = unsweepable(k, columnIndex, column, parentColumn);
    return new CheckedKey(
        k,
        childDb,
        parentDb,
        child.primaryKey(),
        column.rootType(),
        parentKey,
        parentColumn.rootType(),
        unsweepable);
  }

  /**
   * The pool of a database {@code tables:} names or defaults to; a table left unlisted lands in
   * {@code main}, which a configuration with its own {@code databases:} may not have.
   */
  private DataSource dataSource(String database, LooseForeignKey k) {
    try {
      return dataSources.apply(database);
    } catch (NoSuchElementException e) {
      throw problem(
          k,
          "needs database "
              + database
              + ", which is not configured (list the table under tables: with its database)");
    }
  }

  /**
   * Refuses a column cleanup's UPDATE could never set: one PostgreSQL sets alone, or, set to NULL,
   * one declared NOT NULL or kept from NULL by a check constraint or its domain; each batch would
   * fail on it.
   */
  private static void settable(LooseForeignKey k, String name, Column c, boolean toNull) {
    String column = k.child().displayName() + "." + name;
    if (c.setBySystem() != null) {
      throw problem(k, "sets " + name + ", but " + column + " is " + c.setBySystem());
    }
    if (toNull && c.notNull()) {
      throw problem(k, "sets " + name + " to NULL, but " + column + " is declared NOT NULL");
    }
    if (toNull && c.notNullCheck()) {
      throw problem(
          k, "sets " + name + " to NULL, but a check constraint keeps " + column + " from NULL");
    }
    if (toNull && c.notNullDomain() != null) {
      throw problem(
          k,
          "sets "
              + name
              + " to NULL, but "
              + column
              + " is of domain "
              + c.notNullDomain()
              + ", which takes no NULL");
    }
  }

  /**
   * Refuses a value the column's type does not accept, cast the way cleanup binds it (as untyped
   * text), so a typo fails at start-up instead of in every cleanup batch; and a value its column's
   * modifier would change. Cleanup compares the column with the value as the type without its
   * modifier ({@code character varying}, not {@code character varying(3)}) and writes it with the
   * modifier, so a value the modifier cuts or rounds fails every UPDATE ({@code 'abcd'} into {@code
   * varchar(3)}, {@code '10'} into {@code bit(3)}), or never matches as a condition, or is written
   * rounded ({@code 1.234} into {@code numeric(5,2)}) and then still differs from the value, so
   * every batch would update the same rows again. A cast, unlike that assignment, cuts and pads
   * without an error, so both casts are compared by the type's equality: what the modifier leaves
   * equal is accepted ({@code 'ab'} padded to {@code char(3)}, {@code 1.2} as {@code 1.20}).
   */
  private static void fits(
      DataSource ds, LooseForeignKey k, String what, String name, Column column, Object value)
      throws SQLException {
    if (value == null) {
      return;
    }
    // A domain's modifier is its own (the column's type has none): the domain is compared with
    // the type at its bottom, as cleanup's comparison resolves to that type's operator.
    boolean modified = !column.type().equals(column.rootType());
    // The types come from format_type, which quotes what needs quoting.
    String sql =
        modified
            ? "SELECT CAST(CAST(? AS "
                + column.type()
                + ") AS text), CAST(? AS "
                + column.type()
                + ") = CAST(? AS "
                + column.rootType()
                + ")"
            // Compared as cleanup compares them: a type without an = operator (json) fails here.
            : "SELECT CAST(? AS "
                + column.type()
                + ") IS DISTINCT FROM CAST(? AS "
                + column.type()
                + ")";
    String text = String.valueOf(value);
    String changed = null;
    try (Connection c = ds.getConnection();
        PreparedStatement ps = c.prepareStatement(sql)) {
      int parameters = modified ? 3 : 2;
      for (int i = 1; i <= parameters; i++) {
        ps.setObject(i, text, Types.OTHER);
      }
      try (ResultSet rs = ps.executeQuery()) {
        if (modified && rs.next() && !rs.getBoolean(2)) {
          changed = rs.getString(1);
        }
      }
    } catch (SQLException e) {
      if (UNDEFINED_FUNCTION.equals(e.getSQLState())) {
        throw problem(
            k,
            valueIn(what, value, name, column)
                + " cannot be compared with: PostgreSQL has no = operator for that type, so every"
                + " cleanup would fail (jsonb has one where json has not)");
      }
      if (e.getSQLState() == null
          || !(e.getSQLState().startsWith(DATA_EXCEPTION)
              || e.getSQLState().startsWith(INTEGRITY_CONSTRAINT_VIOLATION))) {
        throw e;
      }
      throw problem(k, valueIn(what, value, name, column) + " does not accept");
    }
    if (changed != null) {
      throw problem(
          k,
          valueIn(what, value, name, column)
              + " cannot hold unchanged (its type makes it '"
              + changed
              + "')");
    }
  }

  /** The start of a refusal of a value: {@code has target_value 'x', which column c of type t}. */
  private static String valueIn(String what, Object value, String name, Column column) {
    return "has " + what + " '" + value + "', which column " + name + " of type " + column.type();
  }

  private Optional<Table> table(String database, TableName name, LooseForeignKey k)
      throws SQLException {
    String key = database + "/" + name;
    Optional<Table> known = tables.get(key);
    if (known != null) {
      return known;
    }
    Optional<Table> found = Optional.empty();
    try (Connection c = dataSource(database, k).getConnection();
        PreparedStatement ps =
            c.prepareStatement(
                "SELECT c.oid, c.relkind, row_security_active(c.oid),"
                    + " ARRAY(SELECT i.inhrelid::regclass::text FROM pg_inherits i"
                    + " WHERE i.inhparent = c.oid AND c.relkind = 'r' ORDER BY 1 LIMIT 4)::text[]"
                    + " FROM pg_class c"
                    + " WHERE c.oid = to_regclass(?) AND c.relkind IN ('r', 'p')")) {
      ps.setString(1, name.quoted());
      try (ResultSet rs = ps.executeQuery()) {
        if (rs.next()) {
          long oid = rs.getLong(1);
          found =
              Optional.of(
                  new Table(
                      oid,
                      "p".equals(rs.getString(2)),
                      primaryKey(c, oid),
                      rs.getBoolean(3),
                      List.of((String[]) rs.getArray(4).getArray())));
        }
      }
    }
    tables.put(key, found);
    return found;
  }

  /**
   * Refuses a table whose row-level security applies to Spillway's role: cleanup runs with row
   * security off, so that a policy hiding a live parent fails rather than makes it look deleted,
   * and would fail every batch on it.
   */
  private static void rowSecurity(LooseForeignKey k, String which, TableName name, Table table) {
    if (table.rowSecurity()) {
      throw problem(
          k,
          "names "
              + which
              + " table "
              + name.displayName()
              + ", whose row-level security applies to Spillway's role, so cleanup would fail on"
              + " it (it does not let a policy hide rows it reads); make the role the table's"
              + " owner (without FORCE ROW LEVEL SECURITY) or give it BYPASSRLS");
    }
  }

  private static List<String> primaryKey(Connection c, long oid) throws SQLException {
    List<String> columns = new ArrayList<>();
    try (PreparedStatement ps =
        c.prepareStatement(
            "SELECT a.attname FROM pg_index i"
                + " JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)"
                + " WHERE i.indrelid = ? AND i.indisprimary"
                + " ORDER BY array_position(i.indkey::int2[], a.attnum)")) {
      ps.setLong(1, oid);
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) {
          columns.add(rs.getString(1));
        }
      }
    }
    return columns;
  }

  /**
   * SQL giving the domain a type ({@code typeOid}, an expression) is, or is over, that takes no
   * NULL (declared NOT NULL, or a check constraint saying {@code IS NOT NULL}), or NULL; for the
   * check and for {@code lfk generate}, which skips what the check refuses.
   */
  static String notNullDomain(String typeOid) {
    return "(WITH RECURSIVE d (oid) AS (SELECT "
        + typeOid
        + " UNION ALL SELECT t.typbasetype FROM pg_type t JOIN d ON t.oid = d.oid"
        + " WHERE t.typtype = 'd')"
        + " SELECT format_type(t.oid, NULL) FROM d JOIN pg_type t ON t.oid = d.oid"
        + " WHERE t.typtype = 'd' AND (t.typnotnull OR EXISTS (SELECT 1 FROM pg_constraint dc"
        + " WHERE dc.contypid = t.oid AND dc.contype = 'c'"
        + " AND pg_get_constraintdef(dc.oid) ~* 'IS NOT NULL')) LIMIT 1)";
  }

  /**
   * SQL giving the type a type ({@code typeOid}, an expression) is at the bottom of its domains:
   * itself when it is no domain. For the check and for {@code lfk generate}, which skips what the
   * check refuses.
   */
  static String rootType(String typeOid) {
    return "(WITH RECURSIVE d (oid) AS (SELECT "
        + typeOid
        + " UNION ALL SELECT t.typbasetype FROM pg_type t JOIN d ON t.oid = d.oid"
        + " WHERE t.typtype = 'd')"
        + " SELECT d.oid FROM d JOIN pg_type t ON t.oid = d.oid WHERE t.typtype <> 'd')";
  }

  /** A column of a checked table, or the problem that it has none of that name. */
  private static Column column(
      DataSource ds, Table table, TableName name, String column, LooseForeignKey k)
      throws SQLException {
    try (Connection c = ds.getConnection();
        PreparedStatement ps =
            c.prepareStatement(
                "SELECT attnum, format_type(atttypid, atttypmod), format_type(atttypid, -1),"
                    + " format_type("
                    + rootType("atttypid")
                    + ", -1),"
                    + " attnotnull, (SELECT typcategory FROM pg_type WHERE oid = atttypid),"
                    + " EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = attrelid"
                    + " AND contype = 'c' AND conkey = ARRAY[attnum]"
                    + " AND pg_get_constraintdef(oid) ~* 'IS NOT NULL'),"
                    + " CASE WHEN attgenerated <> '' THEN 'a generated column'"
                    + " WHEN attidentity = 'a' THEN 'an identity column GENERATED ALWAYS' END, "
                    + notNullDomain("atttypid")
                    + ", CASE WHEN attcollation <> 0 THEN attcollation::regcollation::text END,"
                    + " COALESCE((SELECT NOT collisdeterministic FROM pg_collation"
                    + " WHERE oid = attcollation), false)"
                    + " FROM pg_attribute"
                    + " WHERE attrelid = ? AND attname = ? AND attnum > 0 AND NOT attisdropped")) {
      ps.setLong(1, table.oid());
      ps.setString(2, column);
      try (ResultSet rs = ps.executeQuery()) {
        if (!rs.next()) {
          throw problem(
              k, "names column " + column + ", which " + name.displayName() + " does not have");
        }
        return new Column(
            rs.getInt(1),
            rs.getString(2),
            rs.getString(3),
            rs.getString(4),
            rs.getBoolean(5),
            rs.getString(6),
            rs.getBoolean(7),
            rs.getString(8),
            rs.getString(9),
            rs.getString(10),
            rs.getBoolean(11));
      }
    }
  }

  /**
   * Whether cleanup, which casts each deleted key's text to the child column's type, can find a
   * child of every key: a child of text takes any key but a date, time, interval or boolean one
   * (and a string key of a type of its own, as {@code citext}, only when it is of that type too);
   * one of the key's kind of type (numbers, ...: PostgreSQL's type category; of the catch-all one,
   * dates and times, enums and ranges, only the key's own type; a floating-point child or key, only
   * its own type, or an integer child of a floating-point key) takes its keys; an integer child of
   * a text key is asked only for the keys that are integers. Any other pair would fail every batch
   * on the first key the column's type does not read (a uuid child of a bigint key), clean nothing,
   * or clean the children of other keys.
   */
  private static boolean cleanable(Column child, Column parent) {
    String c = child.rootType();
    String p = parent.rootType();
    if (FLOATS.contains(c) || (FLOATS.contains(p) && !INTEGERS.contains(c))) {
      // A float reads another float type's key, or an integer one's, as a neighbouring value:
      // real 0.1 is no double 0.1, and bigints past 2^53 round onto other keys.
      return c.equals(p);
    }
    if (STRING_CATEGORY.equals(child.category())) {
      if (STRING_CATEGORY.equals(parent.category())
          && !(PLAIN_STRINGS.contains(c) && PLAIN_STRINGS.contains(p))) {
        // A string type of its own (citext) compares otherwise than text: 'ABC' and 'abc'.
        return c.equals(p);
      }
      // A key's text is capture's, not PostgreSQL's, for dates, times, intervals and booleans
      // (2024-01-01T10:00:00Z).
      return !TEXT_APART_CATEGORIES.contains(parent.category());
    }
    return (child.category().equals(parent.category())
            && (!OWN_TYPE_CATEGORIES.contains(child.category()) || c.equals(p)))
        || (STRING_CATEGORY.equals(parent.category()) && INTEGERS.contains(c));
  }

  /** What to give a child column {@link #cleanable} refuses. */
  private static String advice(Column child, Column parent) {
    if (FLOATS.contains(parent.rootType())) {
      return "the key's own type, or an integer one";
    }
    if (FLOATS.contains(child.rootType())
        || TEXT_APART_CATEGORIES.contains(parent.category())
        || OWN_TYPE_CATEGORIES.contains(parent.category())
            && !USER_CATEGORY.equals(parent.category())) {
      return "the key's own type";
    }
    if (USER_CATEGORY.equals(parent.category())) {
      return "the key's own type, or text";
    }
    return "the key's kind of type, an integer one for a text key, or text";
  }

  /** The floating-point types, as {@code format_type} names them. */
  private static final Set<String> FLOATS = Set.of("real", "double precision");

  /**
   * The string types whose values compare as their text does, as {@code format_type} names them.
   */
  private static final Set<String> PLAIN_STRINGS = Set.of("text", "character varying", "bpchar");

  /** The integer types, as {@code format_type} names them. */
  private static final Set<String> INTEGERS = Set.of("smallint", "integer", "bigint");

  /** PostgreSQL's catch-all type category. */
  private static final String USER_CATEGORY = "U";

  /** PostgreSQL's type category of enums: one enum reads another's labels as its own. */
  private static final String ENUM_CATEGORY = "E";

  /** PostgreSQL's type category of ranges, whose types share no values. */
  private static final String RANGE_CATEGORY = "R";

  /** PostgreSQL's type category of dates and times (not intervals). */
  private static final String DATE_TIME_CATEGORY = "D";

  /** PostgreSQL's type category of intervals. */
  private static final String INTERVAL_CATEGORY = "T";

  /** PostgreSQL's type category of booleans. */
  private static final String BOOLEAN_CATEGORY = "B";

  /**
   * PostgreSQL's type categories of dates and times, intervals and booleans: a key of theirs
   * reaches cleanup as capture writes it, which their text in a column is not.
   */
  private static final Set<String> TEXT_APART_CATEGORIES =
      Set.of(DATE_TIME_CATEGORY, INTERVAL_CATEGORY, BOOLEAN_CATEGORY);

  /**
   * PostgreSQL's type categories whose types a child must share with its key: the catch-all one
   * (uuid, bytea, json…), whose types have nothing in common (a bytea child reads a uuid key's text
   * as other bytes, never matching), and dates and times, whose casts drop what the other type
   * holds (a timestamp child reads {@code 10:00Z} as 10:00 whatever zone its rows were written in,
   * a date child reads a timestamp key as its day): cleaning by them would take children of live
   * parents and leave the deleted one's.
   */
  private static final Set<String> OWN_TYPE_CATEGORIES =
      Set.of(USER_CATEGORY, DATE_TIME_CATEGORY, ENUM_CATEGORY, RANGE_CATEGORY);

  /** PostgreSQL's type category of text, varchar, char(n) and their domains. */
  private static final String STRING_CATEGORY = "S";

  /**
   * Whether the sweep can tell, comparing a child's value with parent keys in the parent's type,
   * that no parent has it exactly when cleanup (which casts a parent's key to the child's type)
   * would find none: so when both are one type, both integers, or the child's is text or varchar (a
   * key's text cast back gives the key). A text key read as a number would not: '08' and 8.
   */
  static boolean comparable(String childType, String parentType) {
    // Not bpchar: its text drops the padding a parent's bpchar or text key compares with.
    Set<String> texts = Set.of("text", "character varying");
    return childType.equals(parentType)
        || (INTEGERS.contains(childType) && INTEGERS.contains(parentType))
        || texts.contains(childType);
  }

  /** Why the sweep cannot read a key's children, or empty when it can. */
  private static Optional<String> unsweepable(
      LooseForeignKey k, Indexed index, Column column, Column parentColumn) {
    if (!index.forCleanup()) {
      return Optional.of("no index starts with " + k.column() + " (add one, as the warning says)");
    }
    if (!index.inOrder()) {
      return Optional.of(
          "no index of "
              + k.column()
              + "'s default operator class starts with it (one of another, as text_pattern_ops,"
              + " serves cleanup's equality but not the sweep's walk in order)");
    }
    if (!comparable(column.rootType(), parentColumn.rootType())) {
      return Optional.of(
          k.column()
              + " is "
              + column.baseType()
              + " and the parent's key "
              + parentColumn.baseType()
              + ": the sweep compares only the same types, integers, or a child's text");
    }
    return Optional.empty();
  }

  /**
   * What indexes a column has.
   *
   * @param forCleanup whether a valid, whole btree index starts with it (and then the target
   *     column, when asked), of the column's collation: the kind cleanup's statements walk (one of
   *     another collation, {@code COLLATE "C"} on a column of another, the planner passes over for
   *     the column's {@code =})
   * @param inOrder whether one of them also serves the sweep's walk, {@code >} and {@code ORDER BY}
   *     in the column's order: one of the type's default operator class, which {@code
   *     text_pattern_ops}, serving equality only, is not
   */
  private record Indexed(boolean forCleanup, boolean inOrder) {}

  private static Indexed indexed(DataSource ds, Table table, int column, Integer target)
      throws SQLException {
    try (Connection c = ds.getConnection();
        PreparedStatement ps =
            c.prepareStatement(
                "SELECT count(*) > 0, coalesce(bool_or("
                    + defaultClass(0)
                    + (target == null ? "" : " AND " + defaultClass(1))
                    + "), false)"
                    // An invalid index (a CREATE INDEX CONCURRENTLY that failed) is never used.
                    + " FROM pg_index i JOIN pg_class x ON x.oid = i.indexrelid"
                    + " JOIN pg_am a ON a.oid = x.relam WHERE i.indrelid = ? AND i.indisvalid"
                    + " AND a.amname = 'btree' AND i.indkey[0] = ?"
                    // Whole, or holding the rows whose column is not null: every statement's
                    // = ANY, > and IS NOT NULL on the column implies that predicate.
                    + " AND (i.indpred IS NULL OR pg_get_expr(i.indpred, i.indrelid) = '(' ||"
                    + " (SELECT quote_ident(att.attname) FROM pg_attribute att"
                    + " WHERE att.attrelid = i.indrelid AND att.attnum = i.indkey[0])"
                    + " || ' IS NOT NULL)')"
                    + columnsCollation(0)
                    + (target == null
                        ? ""
                        : " AND i.indnkeyatts > 1 AND i.indkey[1] = ?" + columnsCollation(1)))) {
      ps.setLong(1, table.oid());
      ps.setInt(2, column);
      if (target != null) {
        ps.setInt(3, target);
      }
      try (ResultSet rs = ps.executeQuery()) {
        rs.next();
        return new Indexed(rs.getBoolean(1), rs.getBoolean(2));
      }
    }
  }

  /** The index's column at {@code position} is of the table column's collation. */
  private static String columnsCollation(int position) {
    return String.format(
        " AND i.indcollation[%1$d] = (SELECT att.attcollation FROM pg_attribute att"
            + " WHERE att.attrelid = i.indrelid AND att.attnum = i.indkey[%1$d])",
        position);
  }

  /** The index's column at {@code position} is of its type's default operator class. */
  private static String defaultClass(int position) {
    return String.format(
        "EXISTS (SELECT 1 FROM pg_opclass oc WHERE oc.oid = i.indclass[%d] AND oc.opcdefault)",
        position);
  }

  private static String indexWarning(LooseForeignKey k, Table child) {
    List<String> columns = new ArrayList<>(List.of(k.column()));
    k.targetColumn().ifPresent(columns::add);
    String name =
        TableName.cut("index_" + k.child().table() + "_on_" + String.join("_and_", columns));
    return k.describe()
        + ": no index on "
        + k.child().displayName()
        + " starts with "
        + String.join(", ", columns)
        + ", so cleanup scans the table; add one: CREATE INDEX "
        // A partitioned table cannot build its index concurrently; each partition could.
        + (child.partitioned() ? "" : "CONCURRENTLY ")
        + TableName.quote(name)
        + " ON "
        + k.child().quoted()
        + " ("
        + String.join(", ", columns.stream().map(TableName::quote).toList())
        + ");";
  }

  private static ConfigException problem(LooseForeignKey k, String problem) {
    int colon = k.where().lastIndexOf(':');
    String source = colon < 0 ? k.where() : k.where().substring(0, colon);
    Integer line = null;
    if (colon >= 0) {
      try {
        line = Integer.valueOf(k.where().substring(colon + 1));
      } catch (NumberFormatException e) {
        source = k.where();
      }
    }
    return new ConfigException(source, line, k.describe(), problem);
  }
}
