package dev.spillway.lfk;

import dev.spillway.event.TableName;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import java.util.regex.Pattern;

/**
 * Turns real foreign keys into loose ones: GitLab's table of keys, the definitions to append to the
 * definitions file, and per database a migration that drops the keys with its down migration that
 * restores them. Pure: the command reads the catalogs and writes the files.
 */
public final class LfkGenerator {
  private final List<ForeignKey> keys;
  private final List<LooseForeignKey> existing;

  /** One row of the table. */
  public record Row(int id, boolean hasLfk, ForeignKey key) {}

  /**
   * @param keys every foreign key found, in display order
   * @param existing the definitions already in place, for HAS_LFK
   */
  public LfkGenerator(List<ForeignKey> keys, List<LooseForeignKey> existing) {
    this.keys = List.copyOf(keys);
    this.existing = List.copyOf(existing);
  }

  /**
   * The rows shown: every key, or with {@code crossDatabase} only keys whose two tables {@code
   * databaseOf} places in different databases.
   */
  public List<Row> rows(boolean crossDatabase, Function<String, String> databaseOf) {
    List<Row> rows = new ArrayList<>();
    for (ForeignKey k : keys) {
      if (crossDatabase
          && databaseOf.apply(k.from().toString()).equals(databaseOf.apply(k.to().toString()))) {
        continue;
      }
      rows.add(new Row(rows.size(), hasLfk(k), k));
    }
    return rows;
  }

  /**
   * The rows every filter matches (each a regular expression searched in FROM, TO or COLUMN).
   *
   * @throws java.util.regex.PatternSyntaxException for a bad filter
   */
  public static List<Row> matching(List<Row> rows, List<String> filters) {
    List<Pattern> patterns = filters.stream().map(Pattern::compile).toList();
    return rows.stream()
        .filter(
            r ->
                patterns.stream()
                    .allMatch(
                        p ->
                            p.matcher(r.key().from().displayName()).find()
                                || p.matcher(r.key().to().displayName()).find()
                                || p.matcher(r.key().column()).find()))
        .toList();
  }

  /** GitLab's table: ID, HAS_LFK, FROM, TO, COLUMN, ON_DELETE, right-aligned. */
  public static String table(List<Row> rows) {
    String[] head = {"ID", "HAS_LFK", "FROM", "TO", "COLUMN", "ON_DELETE"};
    List<String[]> lines = new ArrayList<>();
    lines.add(head);
    for (Row r : rows) {
      lines.add(
          new String[] {
            String.valueOf(r.id()),
            r.hasLfk() ? "Y" : "N",
            r.key().from().displayName(),
            r.key().to().displayName(),
            r.key().column(),
            r.key().onDelete()
          });
    }
    int[] width = new int[head.length];
    for (String[] l : lines) {
      for (int i = 0; i < l.length; i++) {
        width[i] = Math.max(width[i], l[i].length());
      }
    }
    StringBuilder b = new StringBuilder();
    for (String[] l : lines) {
      for (int i = 0; i < l.length; i++) {
        b.append(i == 0 ? "  " : " | ").append(" ".repeat(width[i] - l[i].length())).append(l[i]);
      }
      b.append('\n');
    }
    return b.toString();
  }

  /** Why a row is not converted, or empty when it can be. */
  public static java.util.Optional<String> skipReason(Row r) {
    if (r.hasLfk()) {
      return java.util.Optional.of("already a loose foreign key");
    }
    if (r.key().columns().size() != 1) {
      return java.util.Optional.of("spans several columns");
    }
    if (r.key().looseAction().isEmpty()) {
      return java.util.Optional.of(
          "ON DELETE " + r.key().onDelete().toUpperCase() + " has no loose equivalent");
    }
    return java.util.Optional.empty();
  }

  /**
   * The definitions file with entries for the keys added: under the child's existing key when the
   * file has one, else as a new key at the end. Comments and everything else stay as written.
   */
  public static String addDefinitions(String file, List<ForeignKey> converted) {
    Map<String, List<ForeignKey>> byChild = new LinkedHashMap<>();
    converted.forEach(k -> byChild.computeIfAbsent(name(k.from()), c -> new ArrayList<>()).add(k));
    List<String> lines =
        new ArrayList<>(file.isEmpty() ? List.of() : List.of(file.split("\n", -1)));
    if (!lines.isEmpty() && lines.get(lines.size() - 1).isEmpty()) {
      lines.remove(lines.size() - 1);
    }
    for (Map.Entry<String, List<ForeignKey>> e : byChild.entrySet()) {
      List<String> entries = entries(e.getValue());
      int at = keyLine(lines, e.getKey());
      if (at < 0) {
        lines.add(e.getKey() + ":");
        lines.addAll(entries);
      } else {
        int end = at + 1;
        while (end < lines.size()
            && (lines.get(end).isBlank()
                || lines.get(end).startsWith(" ")
                || lines.get(end).startsWith("#"))) {
          end++;
        }
        // Keep trailing blank lines and comments after the inserted entries.
        while (end > at + 1
            && (lines.get(end - 1).isBlank() || lines.get(end - 1).startsWith("#"))) {
          end--;
        }
        lines.addAll(end, entries);
      }
    }
    return String.join("\n", lines) + "\n";
  }

  /** The entries as they are added, keyed by child table, for a dry run to show. */
  public static String definitions(List<ForeignKey> converted) {
    Map<String, List<ForeignKey>> byChild = new LinkedHashMap<>();
    converted.forEach(k -> byChild.computeIfAbsent(name(k.from()), c -> new ArrayList<>()).add(k));
    StringBuilder b = new StringBuilder();
    byChild.forEach(
        (child, keys) -> {
          b.append(child).append(":\n");
          entries(keys).forEach(l -> b.append(l).append('\n'));
        });
    return b.toString();
  }

  private static List<String> entries(List<ForeignKey> keys) {
    List<String> entries = new ArrayList<>();
    for (ForeignKey k : keys) {
      entries.add("  - table: " + name(k.to()));
      entries.add("    column: " + k.column());
      entries.add("    on_delete: " + k.looseAction().orElseThrow().yaml());
    }
    return entries;
  }

  /** The migration that drops the keys of one database. */
  public static String up(List<ForeignKey> converted) {
    StringBuilder b =
        new StringBuilder(
            "-- Replaces foreign keys with loose foreign keys (Spillway cleans up the children).\n");
    for (ForeignKey k : converted) {
      b.append("ALTER TABLE ")
          .append(k.from().quoted())
          .append(" DROP CONSTRAINT IF EXISTS ")
          .append(TableName.quote(k.name()))
          .append(";\n");
    }
    return b.toString();
  }

  /** The down migration that restores the keys of one database. */
  public static String down(List<ForeignKey> converted) {
    StringBuilder b = new StringBuilder("-- Restores the foreign keys the up migration dropped.\n");
    for (ForeignKey k : converted) {
      b.append("ALTER TABLE ")
          .append(k.from().quoted())
          .append(" ADD CONSTRAINT ")
          .append(TableName.quote(k.name()))
          .append(' ')
          .append(k.definition())
          .append(";\n");
    }
    return b.toString();
  }

  private boolean hasLfk(ForeignKey k) {
    return existing.stream()
        .anyMatch(
            d ->
                d.child().equals(k.from())
                    && d.parent().equals(k.to())
                    && k.columns().equals(List.of(d.column())));
  }

  private static int keyLine(List<String> lines, String key) {
    for (int i = 0; i < lines.size(); i++) {
      String l = lines.get(i);
      if (l.startsWith(key + ":") && l.substring(key.length() + 1).isBlank()) {
        return i;
      }
    }
    return -1;
  }

  /** A table as the definitions file names it: without {@code public.}. */
  private static String name(TableName t) {
    return t.displayName();
  }
}
