package dev.spillway.buffers;

import java.util.ArrayList;
import java.util.List;

/**
 * The SQL handler's statement as the JDBC driver takes it: each {@code :ids} and {@code :group_id}
 * outside literals, quoted names and comments becomes a {@code ?}, and a {@code ?} written there (a
 * JSON operator such as {@code ?|}) becomes {@code ??}, which the driver sends as one {@code ?}.
 *
 * @param sql the statement to prepare
 * @param names the parameter each {@code ?} stands for, in order: {@code ids} or {@code group_id}
 */
record SqlParameters(String sql, List<String> names) {
  private static final List<String> NAMES = List.of("ids", "group_id");

  SqlParameters {
    names = List.copyOf(names);
  }

  static SqlParameters parse(String statement) {
    StringBuilder out = new StringBuilder(statement.length());
    List<String> names = new ArrayList<>();
    int i = 0;
    int n = statement.length();
    while (i < n) {
      char c = statement.charAt(i);
      int end;
      if (c == '\'') {
        end = quoted(statement, i, '\'', escapesByBackslash(statement, i));
      } else if (c == '"') {
        end = quoted(statement, i, '"', false);
      } else if (c == '-' && statement.startsWith("--", i)) {
        int eol = statement.indexOf('\n', i);
        end = eol < 0 ? n : eol + 1;
      } else if (c == '/' && statement.startsWith("/*", i)) {
        end = blockComment(statement, i);
      } else if (c == '$') {
        end = dollarQuoted(statement, i);
      } else if (c == '?') {
        out.append("??");
        i++;
        continue;
      } else if (c == ':' && (i == 0 || statement.charAt(i - 1) != ':')) {
        String name = parameterAt(statement, i + 1);
        if (name != null) {
          names.add(name);
          out.append('?');
          i += 1 + name.length();
          continue;
        }
        end = i + 1;
      } else {
        end = i + 1;
      }
      out.append(statement, i, end);
      i = end;
    }
    return new SqlParameters(out.toString(), names);
  }

  /** Whether the parameter is used at least once. */
  boolean uses(String name) {
    return names.contains(name);
  }

  private static String parameterAt(String s, int from) {
    for (String name : NAMES) {
      int after = from + name.length();
      if (s.startsWith(name, from) && (after == s.length() || !identifierPart(s.charAt(after)))) {
        return name;
      }
    }
    return null;
  }

  /** {@code E'…'} strings take backslash escapes; standard ones do not. */
  private static boolean escapesByBackslash(String s, int quote) {
    return quote > 0
        && (s.charAt(quote - 1) == 'E' || s.charAt(quote - 1) == 'e')
        && (quote == 1 || !identifierPart(s.charAt(quote - 2)));
  }

  /** The index after a literal or quoted name opened at {@code open}; a doubled quote is inside. */
  private static int quoted(String s, int open, char quote, boolean backslash) {
    int i = open + 1;
    while (i < s.length()) {
      char c = s.charAt(i);
      if (backslash && c == '\\') {
        i += 2;
      } else if (c == quote) {
        if (i + 1 < s.length() && s.charAt(i + 1) == quote) {
          i += 2;
        } else {
          return i + 1;
        }
      } else {
        i++;
      }
    }
    return s.length();
  }

  /** The index after a block comment opened at {@code open}; such comments nest in PostgreSQL. */
  private static int blockComment(String s, int open) {
    int depth = 0;
    int i = open;
    while (i < s.length()) {
      if (s.startsWith("/*", i)) {
        depth++;
        i += 2;
      } else if (s.startsWith("*/", i)) {
        depth--;
        i += 2;
        if (depth == 0) {
          return i;
        }
      } else {
        i++;
      }
    }
    return s.length();
  }

  /**
   * The index after a dollar-quoted string opened at {@code at}, or after the {@code $} alone when
   * none opens there.
   */
  private static int dollarQuoted(String s, int at) {
    String tag = dollarTag(s, at);
    if (tag == null) {
      return at + 1;
    }
    int close = s.indexOf(tag, at + tag.length());
    return close < 0 ? s.length() : close + tag.length();
  }

  /** The {@code $tag$} opening a dollar-quoted string at {@code at}, or null when none does. */
  private static String dollarTag(String s, int at) {
    if (at > 0 && identifierPart(s.charAt(at - 1))) {
      return null; // $ inside a name
    }
    int i = at + 1;
    while (i < s.length() && identifierPart(s.charAt(i)) && s.charAt(i) != '$') {
      i++;
    }
    if (i >= s.length() || s.charAt(i) != '$') {
      return null;
    }
    String tag = s.substring(at, i + 1);
    return tag.length() > 2 && Character.isDigit(tag.charAt(1)) ? null : tag;
  }

  private static boolean identifierPart(char c) {
    return Character.isLetterOrDigit(c) || c == '_' || c == '$';
  }
}
