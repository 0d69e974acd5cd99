package dev.spillway.lfk;

import dev.spillway.event.TableName;
import java.io.StringReader;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.Function;
import java.util.regex.Pattern;
import org.yaml.snakeyaml.DumperOptions;
import org.yaml.snakeyaml.LoaderOptions;
import org.yaml.snakeyaml.Yaml;
import org.yaml.snakeyaml.error.Mark;
import org.yaml.snakeyaml.nodes.CollectionNode;
import org.yaml.snakeyaml.nodes.MappingNode;
import org.yaml.snakeyaml.nodes.Node;
import org.yaml.snakeyaml.nodes.NodeTuple;
import org.yaml.snakeyaml.nodes.ScalarNode;
import org.yaml.snakeyaml.nodes.SequenceNode;
import org.yaml.snakeyaml.nodes.Tag;

/**
 * Turns real foreign keys into loose ones: GitLab's table of keys, the definitions to append to the
 * definitions file, and per database a migration that drops the keys with its down migration that
 * restores them. Pure: the command reads the catalogs and writes the files.
 */
public final class LfkGenerator {
  // Names that YAML reads as the same string when written plain; anything else is quoted.
  private static final Pattern PLAIN =
      Pattern.compile("[A-Za-z_][A-Za-z0-9_$]*(\\.[A-Za-z_][A-Za-z0-9_$]*)?");
  // Plain words YAML 1.1 (GitLab's Ruby) reads as booleans or null.
  private static final Set<String> YAML_WORDS =
      Set.of("y", "n", "yes", "no", "true", "false", "on", "off", "null");

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
    if (r.key().looseAction().isEmpty()) {
      return java.util.Optional.of(
          "ON DELETE " + r.key().onDelete().toUpperCase(Locale.ROOT) + " has no loose equivalent");
    }
    if (changesOnUpdate(r.key())) {
      // Dropped, the key would stop moving its children along (GitLab's partitioned tables' keys
      // move them to a parent's new partition this way).
      return java.util.Optional.of(
          onUpdate(r.key())
              + " changes children when their parent's key changes, which a loose foreign key"
              + " does not do (capture reads deletes only)");
    }
    if (r.key().columns().size() != 1) {
      if (r.key().referring().isEmpty()) {
        return java.util.Optional.of(
            "spans several columns, which do not refer to a partitioned parent's primary key"
                + " holding id, as a loose foreign key would");
      }
      if (r.key().looseAction().get() == OnDelete.ASYNC_NULLIFY) {
        // SET NULL empties every column of the key (unless it names some); a loose one would
        // empty the id's alone.
        return java.util.Optional.of(
            "ON DELETE SET NULL of a key of several columns, which a loose foreign key would do"
                + " to the column referring to id alone (write that definition by hand if the"
                + " key names that column alone)");
      }
    }
    if (!r.key().toPrimaryKey()) {
      // Cleanup matches the column against the parent's primary key: converted, this key would
      // clean the children of other parents and leave its own.
      return java.util.Optional.of(
          "refers to "
              + r.key().to().displayName()
              + "."
              + String.join(",", r.key().referenced())
              + ", not its primary key, which a loose foreign key refers to");
    }
    if (!r.key().childHasPrimaryKey()) {
      // The check at start-up refuses such a definition, which would keep 'run' from starting.
      return java.util.Optional.of(
          "the child has no primary key, which cleanup deletes and updates rows by");
    }
    if (r.key().rowSecurity() != null) {
      // Start-up refuses it too: cleanup runs with row security off, failing on such a table.
      return java.util.Optional.of(
          "row-level security of "
              + r.key().rowSecurity().displayName()
              + " applies to Spillway's role, which cleanup cannot work under (make the role the"
              + " table's owner, without FORCE ROW LEVEL SECURITY, or give it BYPASSRLS)");
    }
    if (r.key().uncleanable() != null) {
      return java.util.Optional.of(r.key().uncleanable() + " (start-up refuses such a key)");
    }
    if (r.key().looseAction().get() == OnDelete.ASYNC_NULLIFY && r.key().columnNotNull()) {
      // So does it this one: async_nullify of a NOT NULL column.
      return java.util.Optional.of(
          "ON DELETE SET NULL of a NOT NULL column, which cleanup cannot set to NULL");
    }
    for (TableName t : List.of(r.key().from(), r.key().to())) {
      if (!DefinitionsFile.nameable(t)) {
        return java.util.Optional.of(
            t.displayName()
                + " has a '.' or a space in its name, which the definitions file cannot write");
      }
    }
    return java.util.Optional.empty();
  }

  /**
   * Why a key is not converted when it was found only where {@code tables:} ({@code databaseOf})
   * places neither of its tables: {@code run} would capture the parent's deletes and clean the
   * children in the databases it places them in, not where the key was, in copies of the tables
   * (GitLab's main and ci each hold every table) that are not the ones written to, or tables not
   * there at all. Empty when it, or a copy of it another database holds ({@code rows}), is where
   * one of its tables is placed (a key between databases places the other elsewhere).
   */
  public static Optional<String> misplaced(
      Row r, List<Row> rows, Function<String, String> databaseOf) {
    ForeignKey k = r.key();
    String child = databaseOf.apply(k.from().toString());
    String parent = databaseOf.apply(k.to().toString());
    boolean placed =
        rows.stream()
            .map(Row::key)
            .filter(o -> sameDefinition(o, k))
            .anyMatch(o -> o.database().equals(child) || o.database().equals(parent));
    if (placed) {
      return Optional.empty();
    }
    return Optional.of(
        "found in database "
            + k.database()
            + ", but tables: places "
            + k.from().displayName()
            + " in "
            + child
            + " and "
            + k.to().displayName()
            + " in "
            + parent
            + ", where run would capture and clean them; list the tables under tables: first");
  }

  /**
   * Why a row no other reason skips is not converted either: another database holds the same key (a
   * table both databases have, as GitLab's main and ci do) with another action, one with a loose
   * equivalent or not, and the one definition both would become takes one; or empty.
   *
   * @param matching the rows the filters match, skipped or not
   */
  public static Optional<String> conflict(Row r, List<Row> matching) {
    return matching.stream()
        .map(Row::key)
        .filter(
            k ->
                sameDefinition(k, r.key())
                    && (!k.onDelete().equals(r.key().onDelete())
                        || changesOnUpdate(k) != changesOnUpdate(r.key())))
        .findFirst()
        .map(
            k ->
                !k.onDelete().equals(r.key().onDelete())
                    ? "database "
                        + k.database()
                        + " holds the same key as "
                        + k.looseAction()
                            .map(OnDelete::yaml)
                            .orElse(
                                "ON DELETE "
                                    + k.onDelete().toUpperCase(Locale.ROOT)
                                    + ", which has no loose equivalent")
                        + ", and one loose foreign key takes one action"
                    : "database "
                        + k.database()
                        + " holds the same key "
                        + (changesOnUpdate(k)
                            ? "with " + onUpdate(k)
                            : "without an ON UPDATE action")
                        + ", and one loose foreign key serves both or neither");
  }

  /** Whether the key changes its children when their parent's key changes. */
  private static boolean changesOnUpdate(ForeignKey k) {
    return List.of("cascade", "nullify", "set default").contains(k.onUpdate());
  }

  /** Its update action as SQL says it: {@code ON UPDATE SET NULL}. */
  private static String onUpdate(ForeignKey k) {
    return "ON UPDATE "
        + (k.onUpdate().equals("nullify") ? "SET NULL" : k.onUpdate().toUpperCase(Locale.ROOT));
  }

  /**
   * The keys as definitions: one per child column and parent, the first of those several databases
   * hold, for the definitions file names each once (each database's migration still drops its own).
   */
  public static List<ForeignKey> oneEach(List<ForeignKey> converted) {
    List<ForeignKey> out = new ArrayList<>();
    for (ForeignKey k : converted) {
      if (out.stream().noneMatch(o -> sameDefinition(o, k))) {
        out.add(k);
      }
    }
    return out;
  }

  private static boolean sameDefinition(ForeignKey a, ForeignKey b) {
    return a.from().equals(b.from())
        && a.to().equals(b.to())
        && a.referring().equals(b.referring());
  }

  /**
   * The definitions file with entries for the keys added (one each, see {@link #oneEach}): under
   * the child's existing key when the file has one (whatever its spelling, {@code events} or {@code
   * public.events}, and at the indentation its list already uses), else as a new key at the end.
   * Comments and everything else stay as written. Where the file is placed is read from its YAML
   * structure, not guessed from lines, and the result is read back before it is returned.
   *
   * @throws IllegalArgumentException when the file is not a mapping of child tables, or a child's
   *     entries are a flow list ({@code [ … ]}) that entries cannot be added to line by line
   */
  public static String addDefinitions(String file, List<ForeignKey> converted) {
    Map<TableName, List<ForeignKey>> byChild = new LinkedHashMap<>();
    oneEach(converted)
        .forEach(k -> byChild.computeIfAbsent(k.from(), c -> new ArrayList<>()).add(k));
    List<String> lines =
        new ArrayList<>(file.isEmpty() ? List.of() : List.of(file.split("\n", -1)));
    if (!lines.isEmpty() && lines.get(lines.size() - 1).isEmpty()) {
      lines.remove(lines.size() - 1);
    }
    MappingNode root = compose(file);
    String rootIndent = root == null ? "" : " ".repeat(root.getStartMark().getColumn());
    // Insertions into existing lists, applied bottom-up so earlier line numbers stay right.
    TreeMap<Integer, List<String>> inserts = new TreeMap<>(Comparator.reverseOrder());
    List<String> appended = new ArrayList<>();
    for (Map.Entry<TableName, List<ForeignKey>> e : byChild.entrySet()) {
      Optional<NodeTuple> existing = childKey(root, e.getKey());
      if (existing.isEmpty()) {
        appended.add(rootIndent + yamlName(name(e.getKey())) + ":");
        appended.addAll(entries(e.getValue(), rootIndent + "  ", rootIndent + "    "));
        continue;
      }
      Node value = existing.get().getValueNode();
      String refused =
          !(value instanceof SequenceNode list)
                  || list.getFlowStyle() != DumperOptions.FlowStyle.BLOCK
                  || list.getValue().isEmpty()
              ? "are not a list of '- table:' entries the generator can add to; write them as one"
              // Another key's list may be this one (an alias of it, or it an alias of theirs):
              // added to, both would change.
              : anchored(list)
                  ? "are or hold a YAML anchor or alias (&, *), which another table's list may"
                      + " share; write them out"
                  : null;
      if (refused != null) {
        throw new IllegalArgumentException(
            "the definitions of "
                + name(e.getKey())
                + " (line "
                + (existing.get().getKeyNode().getStartMark().getLine() + 1)
                + ") "
                + refused);
      }
      SequenceNode seq = (SequenceNode) value;
      String dash = " ".repeat(seq.getStartMark().getColumn());
      Node first = seq.getValue().get(0);
      String key = " ".repeat(Math.max(first.getStartMark().getColumn(), dash.length() + 2));
      inserts
          .computeIfAbsent(lastLine(seq) + 1, l -> new ArrayList<>())
          .addAll(entries(e.getValue(), dash, key));
    }
    inserts.forEach((at, added) -> lines.addAll(at, added));
    lines.addAll(appended);
    String result = String.join("\n", lines) + "\n";
    verify(result, byChild);
    return result;
  }

  /** The entries as they are added, keyed by child table, for a dry run to show. */
  public static String definitions(List<ForeignKey> converted) {
    Map<String, List<ForeignKey>> byChild = new LinkedHashMap<>();
    oneEach(converted)
        .forEach(k -> byChild.computeIfAbsent(name(k.from()), c -> new ArrayList<>()).add(k));
    StringBuilder b = new StringBuilder();
    byChild.forEach(
        (child, keys) -> {
          b.append(yamlName(child)).append(":\n");
          entries(keys, "  ", "    ").forEach(l -> b.append(l).append('\n'));
        });
    return b.toString();
  }

  /**
   * @param dash the indentation of {@code -}
   * @param key the indentation of the keys of an entry
   */
  private static List<String> entries(List<ForeignKey> keys, String dash, String key) {
    String afterDash = " ".repeat(key.length() - dash.length() - 1);
    List<String> entries = new ArrayList<>();
    for (ForeignKey k : keys) {
      entries.add(dash + "-" + afterDash + "table: " + yamlName(name(k.to())));
      entries.add(key + "column: " + yamlName(k.referring().orElseThrow()));
      entries.add(key + "on_delete: " + k.looseAction().orElseThrow().yaml());
    }
    return entries;
  }

  private static MappingNode compose(String yaml) {
    Node root = new Yaml(new LoaderOptions()).compose(new StringReader(yaml));
    if (root == null || Tag.NULL.equals(root.getTag())) {
      return null;
    }
    if (!(root instanceof MappingNode m) || m.getFlowStyle() != DumperOptions.FlowStyle.BLOCK) {
      throw new IllegalArgumentException(
          "the file is not a mapping of child tables the generator can add to");
    }
    return m;
  }

  /** Whether the node or one within it is anchored ({@code &}), as an alias's node is too. */
  private static boolean anchored(Node node) {
    if (node.getAnchor() != null) {
      return true;
    }
    if (node instanceof SequenceNode seq) {
      return seq.getValue().stream().anyMatch(LfkGenerator::anchored);
    }
    if (node instanceof MappingNode m) {
      return m.getValue().stream()
          .anyMatch(t -> anchored(t.getKeyNode()) || anchored(t.getValueNode()));
    }
    return false;
  }

  /** The key of a child table in the file, however it is spelled. */
  private static Optional<NodeTuple> childKey(MappingNode root, TableName child) {
    if (root == null) {
      return Optional.empty();
    }
    return root.getValue().stream()
        .filter(t -> t.getKeyNode() instanceof ScalarNode k && sameTable(k.getValue(), child))
        .findFirst();
  }

  private static boolean sameTable(String written, TableName table) {
    try {
      return TableName.parse(written).equals(table);
    } catch (IllegalArgumentException e) {
      return false;
    }
  }

  /**
   * The 0-based line of the last character of a block list: the end of its last scalar, where a
   * block scalar ({@code |}) ends at the start of the line after it.
   */
  private static int lastLine(Node node) {
    if (node instanceof ScalarNode
        || (node instanceof CollectionNode<?> c
            && c.getFlowStyle() == DumperOptions.FlowStyle.FLOW)) {
      Mark end = node.getEndMark();
      return end.getColumn() == 0 ? end.getLine() - 1 : end.getLine();
    }
    int last = node.getStartMark().getLine();
    if (node instanceof SequenceNode seq) {
      for (Node item : seq.getValue()) {
        last = Math.max(last, lastLine(item));
      }
    } else if (node instanceof MappingNode m) {
      for (NodeTuple t : m.getValue()) {
        last = Math.max(last, Math.max(lastLine(t.getKeyNode()), lastLine(t.getValueNode())));
      }
    }
    return last;
  }

  /** Reads the result back: each added key must be an entry of its child's list. */
  private static void verify(String result, Map<TableName, List<ForeignKey>> added) {
    MappingNode root;
    try {
      root = compose(result);
    } catch (RuntimeException e) {
      throw new IllegalStateException(
          "Adding to the definitions file would break its YAML (" + e.getMessage() + ")", e);
    }
    for (Map.Entry<TableName, List<ForeignKey>> e : added.entrySet()) {
      List<String> found = new ArrayList<>();
      childKey(root, e.getKey())
          .map(NodeTuple::getValueNode)
          .filter(SequenceNode.class::isInstance)
          .ifPresent(
              v -> ((SequenceNode) v).getValue().forEach(item -> found.add(entryText(item))));
      for (ForeignKey k : e.getValue()) {
        if (!found.contains(name(k.to()) + "/" + k.referring().orElseThrow())) {
          throw new IllegalStateException(
              "Adding to the definitions file did not give an entry for "
                  + name(k.from())
                  + "."
                  + k.referring().orElseThrow()
                  + "; nothing was written");
        }
      }
    }
  }

  private static String entryText(Node item) {
    String table = null;
    String column = null;
    if (item instanceof MappingNode m) {
      for (NodeTuple t : m.getValue()) {
        if (t.getKeyNode() instanceof ScalarNode k && t.getValueNode() instanceof ScalarNode v) {
          if (k.getValue().equals("table")) {
            table = TableName.parse(v.getValue()).displayName();
          } else if (k.getValue().equals("column")) {
            column = v.getValue();
          }
        }
      }
    }
    return table + "/" + column;
  }

  /** A name as a YAML scalar: plain when it reads back as the same string, else quoted. */
  private static String yamlName(String name) {
    if (PLAIN.matcher(name).matches() && !YAML_WORDS.contains(name.toLowerCase(Locale.ROOT))) {
      return name;
    }
    return "'" + name.replace("'", "''") + "'";
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
                    && k.referring().equals(java.util.Optional.of(d.column())));
  }

  /** A table as the definitions file names it: without {@code public.}. */
  private static String name(TableName t) {
    return t.displayName();
  }
}
