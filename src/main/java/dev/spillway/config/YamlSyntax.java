package dev.spillway.config;

import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.yaml.snakeyaml.error.Mark;
import org.yaml.snakeyaml.error.MarkedYAMLException;

/**
 * A YAML syntax error in words a configuration's author knows, at the line to look at: the parser
 * speaks of block ends and tokens, and for something never closed it names the end of the file
 * rather than where the quote or bracket was opened. What has no plainer words keeps the parser's.
 */
final class YamlSyntax {
  private YamlSyntax() {}

  /** The sentence (without a full stop) and its 1-based line, or null when not known. */
  record Problem(Integer line, String sentence) {}

  private static final Pattern CANNOT_START =
      Pattern.compile("found character '(.)' that cannot start any token.*", Pattern.DOTALL);
  private static final Pattern UNDEFINED_ALIAS = Pattern.compile("found undefined alias (.+)");

  /**
   * @param text the YAML text the error is about
   */
  static Problem of(MarkedYAMLException e, String text) {
    String problem = e.getProblem() == null ? "" : e.getProblem().strip();
    String context = e.getContext() == null ? "" : e.getContext();
    Integer at = line(e.getProblemMark());
    Integer opened = line(e.getContextMark());
    if (problem.contains("(TAB)")) {
      return new Problem(at, "a tab cannot start a token, indent with spaces");
    }
    if (problem.equals("mapping values are not allowed here")) {
      Problem keyWithoutColon =
          keyWithoutColon(
              text, at, e.getProblemMark() == null ? -1 : e.getProblemMark().getColumn());
      if (keyWithoutColon != null) {
        return keyWithoutColon;
      }
      return new Problem(
          at,
          "a ':' where no setting can begin: indent the line as the settings beside it, or put"
              + " a value that holds ': ' in quotes");
    }
    if (problem.equals("could not find expected ':'") && context.contains("simple key")) {
      // A key without its ':' among the settings of a block, not the first: the parser read it
      // as a key still to be given its ':', and names the line after it.
      Problem noColon = simpleKeyWithoutColon(text, opened);
      if (noColon != null) {
        return noColon;
      }
    }
    if (problem.startsWith("expected <block end>")) {
      if (problem.endsWith("'<block mapping start>'")) {
        return new Problem(
            at,
            "the line's indentation matches no level above it: indent it as the other settings of"
                + " its section");
      }
      if (problem.endsWith("'-'")) {
        return new Problem(
            at,
            "a list item among settings: a list is a setting's value, each '- ' indented under"
                + " that setting");
      }
      if (context.contains("block collection")) {
        return new Problem(
            at,
            "a setting where the list above it expects its next item (an item starts with '- ')");
      }
    }
    if (context.contains("quoted scalar") && problem.contains("end of stream")) {
      return new Problem(opened, "the quote opened on this line is never closed");
    }
    if (context.contains("flow mapping") || context.contains("flow sequence")) {
      String open = context.contains("mapping") ? "{" : "[";
      String close = context.contains("mapping") ? "}" : "]";
      return new Problem(
          opened,
          "the '"
              + open
              + "' opened on this line is not closed with '"
              + close
              + "', or its entries lack a ',' between them"
              + (at != null && !at.equals(opened) && !problem.contains("<stream end>")
                  ? " (read up to line " + at + ")"
                  : ""));
    }
    if (problem.contains("found another document")) {
      return new Problem(
          at,
          "a second document ('---') begins here, where Spillway reads one: move its settings"
              + " into the first and remove the line");
    }
    Matcher cannot = CANNOT_START.matcher(problem);
    if (cannot.matches()) {
      return new Problem(
          at, "'" + cannot.group(1) + "' cannot begin a value: put the value in quotes");
    }
    Matcher alias = UNDEFINED_ALIAS.matcher(problem);
    if (alias.matches()) {
      String name = alias.group(1);
      return new Problem(at, "'*" + name + "' refers to no anchor '&" + name + "' above it");
    }
    return new Problem(at, oneLine(problem.isEmpty() ? e.getClass().getSimpleName() : problem));
  }

  /**
   * A key written without its ':' on the line above {@code line}: the parser reads it and the next
   * line as one value, then finds that line's ':' where no setting can begin. Only when the line
   * above is one word at the same indentation and the ':' found is that line's first (a value on a
   * line of its own, or one holding ': ', is not this); null otherwise.
   *
   * @param column 0-based column of the ':' the parser stopped at
   */
  private static Problem keyWithoutColon(String text, Integer line, int column) {
    if (text == null || line == null) {
      return null;
    }
    String[] lines = text.split("\\R", -1);
    if (line - 1 >= lines.length || lines[line - 1].indexOf(':') != column) {
      return null;
    }
    int indent = indent(lines[line - 1]);
    for (int i = line - 2; i >= 0; i--) {
      String above = lines[i].strip();
      if (above.isEmpty() || above.startsWith("#")) {
        continue;
      }
      if (indent(lines[i]) != indent
          || above.contains(":")
          || above.startsWith("-")
          || above.contains(" ")) {
        return null;
      }
      return lacksColon(i + 1, above);
    }
    return null;
  }

  /**
   * The line {@code line} (1-based) as a setting written without its ': ': one word lacks the ':'
   * after it; words with a space between them lack the ': ' between name and value. Null for a line
   * that is neither (a list item, a comment).
   */
  private static Problem simpleKeyWithoutColon(String text, Integer line) {
    if (text == null || line == null) {
      return null;
    }
    String[] lines = text.split("\\R", -1);
    if (line - 1 >= lines.length) {
      return null;
    }
    // A comment after it is no part of the setting.
    String written = lines[line - 1].replaceFirst("\\s+#.*$", "").strip();
    if (written.isEmpty() || written.startsWith("#") || written.startsWith("-")) {
      return null;
    }
    if (!written.contains(" ")) {
      return lacksColon(line, written);
    }
    return new Problem(
        line,
        "'"
            + written
            + "' is no setting: write it as name: value, with a ':' and a space after the name");
  }

  /** A key written without its ':' at {@code line}, the setting below it read as its value. */
  private static Problem lacksColon(int line, String key) {
    return new Problem(
        line, "'" + key + "' lacks the ':' after it, so the setting on the next line cannot begin");
  }

  private static int indent(String line) {
    int n = 0;
    while (n < line.length() && line.charAt(n) == ' ') {
      n++;
    }
    return n;
  }

  /** The parser's text on one line, without its own full stop. */
  static String oneLine(String text) {
    if (text.contains("(TAB)")) {
      return "a tab cannot start a token, indent with spaces";
    }
    String s = text.strip().replaceAll("\\s+", " ");
    return s.endsWith(".") ? s.substring(0, s.length() - 1) : s;
  }

  private static Integer line(Mark mark) {
    return mark == null ? null : mark.getLine() + 1;
  }
}
