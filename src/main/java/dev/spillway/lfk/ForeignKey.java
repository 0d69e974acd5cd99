package dev.spillway.lfk;

import dev.spillway.event.TableName;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import javax.sql.DataSource;

/**
 * A real foreign key found in a database's catalog, as the generator shows and converts it.
 *
 * @param from the referencing (child) table
 * @param to the referenced (parent) table
 * @param columns the referencing columns; the generator converts one-column keys, and keys of
 *     several to a primary key holding {@code id} ({@link #referring()})
 * @param onUpdate its action when the parent's key changes, named as {@code onDelete} is
 * @param onDelete PostgreSQL's action: {@code cascade}, {@code nullify}, {@code restrict}, {@code
 *     no action} or {@code set default}
 * @param definition {@code pg_get_constraintdef}, to restore the key
 * @param referenced the parent's columns the key refers to
 * @param toPrimaryKey whether those are the parent's primary key, which a loose foreign key refers
 *     to; a key to another unique column cannot become one
 * @param childHasPrimaryKey whether the referencing table has a primary key, by which cleanup
 *     deletes and updates its rows; without one, a loose foreign key is refused at start-up
 * @param columnNotNull whether a referencing column is {@code NOT NULL}, or kept from NULL by a
 *     check constraint of its own or its domain: a key setting it to NULL on delete (PostgreSQL
 *     takes one, failing each such delete) becomes a definition refused at start-up
 * @param rowSecurity the child or the parent table, the child first, whose row-level security
 *     applies to the role that read the catalog, which start-up refuses; null when neither's does
 * @param uncleanable why start-up would refuse a loose foreign key of this one's tables and types
 *     that the other fields do not say (tables inherit from the parent; the column and the key are
 *     dates or times of two types; a key of several columns to a table not partitioned), or null
 */
public record ForeignKey(
    String database,
    TableName from,
    TableName to,
    List<String> columns,
    String onDelete,
    String onUpdate,
    String name,
    String definition,
    List<String> referenced,
    boolean toPrimaryKey,
    boolean childHasPrimaryKey,
    boolean columnNotNull,
    TableName rowSecurity,
    String uncleanable) {
  public ForeignKey {
    Objects.requireNonNull(database, "database");
    columns = List.copyOf(columns);
    referenced = List.copyOf(referenced);
  }

  /** The action a loose foreign key takes instead, when there is one. */
  public java.util.Optional<OnDelete> looseAction() {
    return switch (onDelete) {
      case "cascade" -> java.util.Optional.of(OnDelete.ASYNC_DELETE);
      case "nullify" -> java.util.Optional.of(OnDelete.ASYNC_NULLIFY);
      default -> java.util.Optional.empty();
    };
  }

  /**
   * The column a loose foreign key made of this one names: its only one, or, of a key of several to
   * the parent's primary key, the one referring to the parent's {@code id} (as GitLab's partitioned
   * tables' children refer to {@code (partition_id, id)}); empty for any other.
   */
  public java.util.Optional<String> referring() {
    if (columns.size() == 1) {
      return java.util.Optional.of(columns.get(0));
    }
    int id = referenced.indexOf(LooseForeignKey.ID);
    return toPrimaryKey && id >= 0
        ? java.util.Optional.of(columns.get(id))
        : java.util.Optional.empty();
  }

  /** The column as GitLab's table shows it (several joined by commas). */
  public String column() {
    return String.join(",", columns);
  }

  /** In {@link #read}: the position of the parent's {@code id} in a key of several, or null. */
  private static final String REFERRING_ID =
      "(SELECT k.i FROM unnest(con.confkey) WITH ORDINALITY k(attnum, i)"
          + " JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.attnum"
          + " WHERE cardinality(con.confkey) > 1 AND a.attname = '"
          + LooseForeignKey.ID
          + "')";

  /**
   * Every foreign key defined on a table of the database (not the copies PostgreSQL keeps on
   * partitions), outside the system schemas and Spillway's own.
   */
  public static List<ForeignKey> read(String database, DataSource ds) throws SQLException {
    String sql =
        "SELECT n.nspname, c.relname, fn.nspname, fc.relname, con.conname,"
            + " pg_get_constraintdef(con.oid), con.confdeltype,"
            + " ARRAY(SELECT a.attname FROM unnest(con.conkey) WITH ORDINALITY k(attnum, i)"
            + "   JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum"
            + "   ORDER BY k.i)::text[],"
            + " ARRAY(SELECT a.attname FROM unnest(con.confkey) WITH ORDINALITY k(attnum, i)"
            + "   JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.attnum"
            + "   ORDER BY k.i)::text[],"
            + " EXISTS (SELECT 1 FROM pg_constraint pk WHERE pk.conrelid = con.confrelid"
            + "   AND pk.contype = 'p' AND pk.conkey @> con.confkey AND pk.conkey <@ con.confkey),"
            + " EXISTS (SELECT 1 FROM pg_constraint pk WHERE pk.conrelid = con.conrelid"
            + "   AND pk.contype = 'p'),"
            + " EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = con.conrelid"
            + "   AND a.attnum = ANY (con.conkey) AND (a.attnotnull OR "
            + DefinitionCheck.notNullDomain("a.atttypid")
            + " IS NOT NULL))"
            + " OR EXISTS (SELECT 1 FROM pg_constraint ck WHERE ck.conrelid = con.conrelid"
            + "   AND ck.contype = 'c' AND ck.conkey = con.conkey"
            + "   AND pg_get_constraintdef(ck.oid) ~* 'IS NOT NULL'),"
            + " row_security_active(c.oid), row_security_active(fc.oid),"
            // As DefinitionCheck refuses them, a domain read as the type at the bottom of its own.
            + " CASE WHEN fc.relkind = 'r'"
            + "   AND EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhparent = fc.oid)"
            + "   THEN 'inherited'"
            + " WHEN cardinality(con.confkey) > 1 AND fc.relkind <> 'p' THEN 'unpartitioned'"
            // The pair of columns a loose foreign key would compare: the only one, or the one
            // referring to the parent's id.
            + " WHEN cardinality(con.conkey) = 1 OR "
            + REFERRING_ID
            + " IS NOT NULL THEN (SELECT CASE"
            + "   WHEN ct.typcategory = 'D' AND pt.typcategory = 'D' AND ct.oid <> pt.oid"
            + "   THEN 'dates'"
            + "   WHEN ct.oid <> pt.oid AND (ct.oid IN ('float4'::regtype, 'float8'::regtype)"
            + "   OR pt.oid IN ('float4'::regtype, 'float8'::regtype)"
            + "   AND ct.oid NOT IN ('int2'::regtype, 'int4'::regtype, 'int8'::regtype))"
            + "   THEN 'floats'"
            + "   WHEN ct.typcategory = 'S' AND pt.typcategory = 'S' AND ct.oid <> pt.oid"
            + "   AND NOT (ct.oid IN ('text'::regtype, 'varchar'::regtype, 'bpchar'::regtype)"
            + "   AND pt.oid IN ('text'::regtype, 'varchar'::regtype, 'bpchar'::regtype))"
            + "   THEN 'strings' END"
            + "   FROM pg_attribute ca JOIN pg_type ct ON ct.oid = "
            + DefinitionCheck.rootType("ca.atttypid")
            + ", pg_attribute pa JOIN pg_type pt ON pt.oid = "
            + DefinitionCheck.rootType("pa.atttypid")
            + "   WHERE ca.attrelid = con.conrelid"
            + "   AND ca.attnum = con.conkey[coalesce("
            + REFERRING_ID
            + ", 1)]"
            + "   AND pa.attrelid = con.confrelid"
            + "   AND pa.attnum = con.confkey[coalesce("
            + REFERRING_ID
            + ", 1)]) END"
            + ", con.confupdtype"
            + " FROM pg_constraint con"
            + " JOIN pg_class c ON c.oid = con.conrelid"
            + " JOIN pg_namespace n ON n.oid = c.relnamespace"
            + " JOIN pg_class fc ON fc.oid = con.confrelid"
            + " JOIN pg_namespace fn ON fn.oid = fc.relnamespace"
            + " WHERE con.contype = 'f' AND con.conparentid = 0"
            + " AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'spillway')"
            + " ORDER BY n.nspname, c.relname, con.conname";
    List<ForeignKey> out = new ArrayList<>();
    try (Connection c = ds.getConnection();
        Statement s = c.createStatement();
        ResultSet rs = s.executeQuery(sql)) {
      while (rs.next()) {
        String[] columns = (String[]) rs.getArray(8).getArray();
        String[] referenced = (String[]) rs.getArray(9).getArray();
        TableName from = new TableName(rs.getString(1), rs.getString(2));
        TableName to = new TableName(rs.getString(3), rs.getString(4));
        out.add(
            new ForeignKey(
                database,
                from,
                to,
                List.of(columns),
                action(rs.getString(7)),
                action(rs.getString(16)),
                rs.getString(5),
                rs.getString(6),
                List.of(referenced),
                rs.getBoolean(10),
                rs.getBoolean(11),
                rs.getBoolean(12),
                rs.getBoolean(13) ? from : rs.getBoolean(14) ? to : null,
                uncleanable(rs.getString(15), to)));
      }
    }
    return out;
  }

  private static String uncleanable(String code, TableName to) {
    if (code == null) {
      return null;
    }
    return switch (code) {
      case "inherited" ->
          "tables inherit from "
              + to.displayName()
              + ", whose rows' deletes would be captured under their own names";
      case "unpartitioned" ->
          to.displayName()
              + " has a key of several columns and is not partitioned, so its ids may repeat"
              + " under the others, which cleanup by id would take for a parent still there";
      case "floats" ->
          "the column or the key is floating-point and the other of another type (not an"
              + " integer column), which cleanup cannot compare";
      case "strings" ->
          "the column and the key are strings of two types, one of which compares otherwise"
              + " than text (as citext), which cleanup cannot compare";
      default ->
          "the column and the key are dates or times of two types, which cleanup cannot"
              + " compare";
    };
  }

  private static String action(String code) {
    return switch (code) {
      case "c" -> "cascade";
      case "n" -> "nullify";
      case "r" -> "restrict";
      case "d" -> "set default";
      default -> "no action";
    };
  }
}
