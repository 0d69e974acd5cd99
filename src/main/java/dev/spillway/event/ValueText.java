package dev.spillway.event;

import java.util.HexFormat;

/**
 * Event values as PostgreSQL's text input reads them, for the composite and array literals built
 * from captured rows: {@code bytea} in hex, everything else by its own text, quoted with double
 * quotes and backslashes where a literal needs it.
 */
public final class ValueText {
  private ValueText() {}

  /** An event value's text: {@code bytea} (bytes) as {@code \x0001ff}, others as they are. */
  public static String of(Object value) {
    return value instanceof byte[] bytes
        ? "\\x" + HexFormat.of().formatHex(bytes)
        : value.toString();
  }

  /** Appends {@code text} in double quotes, a backslash before each double quote and backslash. */
  public static StringBuilder appendQuoted(StringBuilder out, String text) {
    out.append('"');
    for (int k = 0; k < text.length(); k++) {
      char ch = text.charAt(k);
      if (ch == '"' || ch == '\\') {
        out.append('\\');
      }
      out.append(ch);
    }
    return out.append('"');
  }
}
