package dev.spillway.lfk;

import dev.spillway.config.ConfigLoader;
import dev.spillway.config.ConfigNode;
import dev.spillway.event.TableName;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;

/**
 * Loose-foreign-key definitions in GitLab's format, read as they are: a mapping keyed by child
 * table, each a list of entries with {@code table} (the parent), {@code column}, {@code on_delete}
 * ({@code async_delete}, {@code async_nullify}, {@code update_column_to}, a leading {@code :}
 * allowed), {@code target_column} and {@code target_value} for {@code update_column_to}, and
 * optional {@code conditions} and {@code delete_limit}. Every problem names file, line and entry.
 */
public final class DefinitionsFile {
  /** Whether this file can name the table, as {@code table} or {@code schema.table}. */
  static boolean nameable(TableName t) {
    return TableName.writable(t.toString()); // a dot in either name makes three
  }

  private static final int MAX_DELETE_LIMIT = 1_000_000;

  private DefinitionsFile() {}

  /**
   * The definitions of a {@code loose-foreign-keys:} section: those of the file its {@code file}
   * key names (relative to {@code baseDir}), then those written inline under {@code definitions}.
   * Reads only those two keys.
   *
   * @param fileMayBeMissing for the generator, which creates the file
   */
  static List<LooseForeignKey> read(ConfigNode section, Path baseDir, boolean fileMayBeMissing) {
    List<Located> all = new ArrayList<>();
    Optional<String> file = section.optionalString("file");
    if (file.isPresent()) {
      if (file.get().isBlank()) {
        throw section.error("file", "must name a file");
      }
      Path path = baseDir.resolve(file.get());
      if (java.nio.file.Files.isDirectory(path)) {
        throw section.error("file", "names " + path + ", which is a directory, not a file");
      }
      if (java.nio.file.Files.isRegularFile(path)) {
        all.addAll(parse(ConfigLoader.readNode(path, file.get())));
      } else if (!fileMayBeMissing) {
        throw section.error("file", "names " + path + ", which" + ConfigLoader.whyMissing(path));
      }
    }
    section.child("definitions").ifPresent(n -> all.addAll(parse(n)));
    return checked(all);
  }

  /** The definitions in a file of GitLab's format. */
  public static List<LooseForeignKey> read(Path file) {
    return checked(parse(ConfigLoader.readNode(file, file.toString())));
  }

  /** Definitions in a mapping keyed by child table. */
  private static List<Located> parse(ConfigNode byChild) {
    List<Located> out = new ArrayList<>();
    for (String child : byChild.keys()) {
      Optional<String> unwritable = TableName.unwritable(child);
      if (unwritable.isPresent()) {
        throw byChild.error(child, unwritable.get());
      }
      if (!byChild.isList(child)) {
        throw byChild.error(
            child, "must be a list of definitions (- table: … column: … on_delete: …)");
      }
      TableName childName = TableName.parse(child);
      for (ConfigNode entry : byChild.mappings(child)) {
        out.add(new Located(entry(childName, entry), entry));
      }
    }
    byChild.finish();
    return out;
  }

  private static LooseForeignKey entry(TableName child, ConfigNode e) {
    String parent = e.requiredString("table");
    Optional<String> unwritable = TableName.unwritable(parent);
    if (unwritable.isPresent()) {
      throw e.error("table", unwritable.get());
    }
    String column = e.requiredString("column");
    String action = e.requiredString("on_delete");
    OnDelete onDelete =
        OnDelete.parse(action)
            .orElseThrow(
                () ->
                    e.error(
                        "on_delete",
                        "must be async_delete, async_nullify or update_column_to, not '"
                            + action
                            + "'"));
    Optional<String> targetColumn = e.optionalString("target_column");
    // Present even when null: a null target value sets the column to NULL.
    boolean hasTargetValue = e.keys().contains("target_value");
    Object targetValue = e.typedScalar("target_value").orElse(null);
    if (onDelete == OnDelete.UPDATE_COLUMN_TO) {
      if (targetColumn.isEmpty()) {
        throw e.error("target_column", "is required when on_delete is update_column_to");
      }
      if (!hasTargetValue) {
        throw e.error("target_value", "is required when on_delete is update_column_to");
      }
    } else if (targetColumn.isPresent() || hasTargetValue) {
      throw e.error(
          targetColumn.isPresent() ? "target_column" : "target_value",
          "applies only when on_delete is update_column_to, not " + onDelete.yaml());
    }
    List<LooseForeignKey.Condition> conditions = conditions(e);
    OptionalInt deleteLimit = OptionalInt.empty();
    if (e.has("delete_limit")) {
      deleteLimit = OptionalInt.of(e.integer("delete_limit", 1, 1, MAX_DELETE_LIMIT));
    } else {
      e.known("delete_limit");
    }
    e.finish();
    return new LooseForeignKey(
        child,
        TableName.parse(parent),
        column,
        onDelete,
        targetColumn,
        targetValue,
        conditions,
        deleteLimit,
        e.source() + ":" + e.line());
  }

  /** {@code conditions: {column: value}} or {@code conditions: [{column: c, value: v}]}. */
  private static List<LooseForeignKey.Condition> conditions(ConfigNode e) {
    List<LooseForeignKey.Condition> out = new ArrayList<>();
    if (e.isList("conditions")) {
      for (ConfigNode c : e.mappings("conditions")) {
        out.add(
            new LooseForeignKey.Condition(
                c.requiredString("column"), c.typedScalar("value").orElse(null)));
        c.finish();
      }
      return out;
    }
    Optional<ConfigNode> mapping = e.child("conditions");
    if (mapping.isPresent()) {
      ConfigNode m = mapping.get();
      for (String column : m.keys()) {
        out.add(new LooseForeignKey.Condition(column, m.typedScalar(column).orElse(null)));
      }
      m.finish();
    }
    return out;
  }

  /** A definition and the entry it was read from, for messages about it. */
  private record Located(LooseForeignKey key, ConfigNode entry) {}

  /** Rejects a second definition of the same child column and parent. */
  private static List<LooseForeignKey> checked(List<Located> all) {
    Map<String, LooseForeignKey> seen = new HashMap<>();
    List<LooseForeignKey> out = new ArrayList<>();
    for (Located l : all) {
      LooseForeignKey k = l.key();
      LooseForeignKey first = seen.putIfAbsent(k.child() + "." + k.column() + "→" + k.parent(), k);
      if (first != null) {
        throw l.entry()
            .invalid("defines " + k.describe() + " again (first at " + first.where() + ")");
      }
      out.add(k);
    }
    return List.copyOf(out);
  }
}
