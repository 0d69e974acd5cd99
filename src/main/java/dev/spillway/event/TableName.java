package dev.spillway.event;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

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

  /**
   * Whether configuration can name a table so: {@code table} or {@code schema.table}, neither name
   * empty nor holding a dot or a blank (any Unicode space, a no-break space among them).
   */
  public static boolean writable(String written) {
    String[] parts = written.split("\\.", -1);
    return parts.length <= 2
        && java.util.Arrays.stream(parts)
            .allMatch(p -> !p.isEmpty() && p.codePoints().noneMatch(TableName::blank));
  }

  /**
   * What is wrong with {@code written} as configuration's name of a table, said after the key that
   * wrote it: no table name, or longer than PostgreSQL keeps; empty when nothing is.
   */
  public static Optional<String> unwritable(String written) {
    return writable(written)
        ? parse(written).overlong()
        : Optional.of("is not a table name (write table or schema.table)");
  }

  /** A character configuration takes for a blank: white space, or a space that does not break. */
  public static boolean blank(int c) {
    return Character.isWhitespace(c) || Character.isSpaceChar(c);
  }

  /** Parses {@code table} or {@code schema.table}. */
  public static TableName parse(String name) {
    int dot = name.indexOf('.');
    if (dot < 0) {
      return new TableName("public", name);
    }
    return new TableName(name.substring(0, dot), name.substring(dot + 1));
  }

  /**
   * The longest name PostgreSQL keeps, in bytes ({@code NAMEDATALEN - 1}): it cuts a longer one to
   * it, so the table made under a longer name has another, which capture and the catalog report.
   */
  public static final int MAX_NAME_BYTES = 63;

  /**
   * What is wrong with a part of this name longer than PostgreSQL keeps, said after the key that
   * wrote it; empty when none is.
   */
  public Optional<String> overlong() {
    if (List.of(schema, table).stream()
        .noneMatch(p -> p.getBytes(StandardCharsets.UTF_8).length > MAX_NAME_BYTES)) {
      return Optional.empty();
    }
    return Optional.of(
        "is longer than the "
            + MAX_NAME_BYTES
            + " bytes PostgreSQL keeps of a name, which it cuts to '"
            + new TableName(cut(schema), cut(table)).displayName()
            + "': write that");
  }

  /**
   * As PostgreSQL cuts a name (a server encoding UTF-8): its whole characters within {@link
   * #MAX_NAME_BYTES} bytes.
   */
  public static String cut(String part) {
    int bytes = 0;
    int end = 0;
    while (end < part.length()) {
      int cp = part.codePointAt(end);
      bytes += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; // its UTF-8 bytes
      if (bytes > MAX_NAME_BYTES) {
        break;
      }
      end += Character.charCount(cp);
    }
    return part.substring(0, end);
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
