package dev.spillway.event;

import java.util.Objects;

/**
 * A schema-qualified table name. Unqualified names mean {@code public}. Names are kept as written
 * in the catalog; {@link #quoted()} is the only form that goes into SQL.
 */
public record TableName(String schema, String table) {
  public TableName {
    Objects.requireNonNull(schema, "schema");
    Objects.requireNonNull(table, "table");
    if (schema.isEmpty() || table.isEmpty()) {
      throw new IllegalArgumentException("empty table name");
    }
  }

  /** Parses {@code table} or {@code schema.table}. */
  public static TableName parse(String name) {
    int dot = name.indexOf('.');
    if (dot < 0) {
      return new TableName("public", name);
    }
    return new TableName(name.substring(0, dot), name.substring(dot + 1));
  }

  /** The identifier quoted for SQL: {@code "schema"."table"}. */
  public String quoted() {
    return quote(schema) + "." + quote(table);
  }

  public static String quote(String identifier) {
    return "\"" + identifier.replace("\"", "\"\"") + "\"";
  }

  /** How messages name it: without {@code public.}, with any other schema. */
  public String displayName() {
    return schema.equals("public") ? table : toString();
  }

  @Override
  public String toString() {
    return schema + "." + table;
  }
}
