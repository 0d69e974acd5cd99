package dev.spillway.lfk;

import dev.spillway.event.TableName;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalInt;

/**
 * One loose foreign key as written in the definitions file: rows of {@code child} whose {@code
 * column} holds the primary key of a deleted {@code parent} row get {@code onDelete}.
 *
 * @param targetColumn and {@code targetValue}: for {@link OnDelete#UPDATE_COLUMN_TO} only
 * @param targetValue the value written as YAML gave it (String, Long, Double, Boolean), or null
 * @param conditions extra equality filters on child columns, all of which must hold
 * @param deleteLimit rows per statement instead of the default (1,000 deletes, 500 updates)
 * @param where where it was written, such as {@code loose_foreign_keys.yml:12}, for messages
 */
public record LooseForeignKey(
    TableName child,
    TableName parent,
    String column,
    OnDelete onDelete,
    Optional<String> targetColumn,
    Object targetValue,
    List<Condition> conditions,
    OptionalInt deleteLimit,
    String where) {

  /** The column a key of several columns is referred to by, as GitLab's partitioned tables are. */
  static final String ID = "id";

  /**
   * The column of a parent's primary key children refer to: its only one, or {@code id} of a key of
   * several that holds one (GitLab's partitioned tables' {@code (id, partition_id)}, whose ids come
   * from one sequence, as GitLab's own cleanup takes them); empty for any other key.
   */
  static Optional<String> referredColumn(java.util.Collection<String> primaryKey) {
    if (primaryKey.size() == 1) {
      return Optional.of(primaryKey.iterator().next());
    }
    return primaryKey.contains(ID) ? Optional.of(ID) : Optional.empty();
  }

  /**
   * A plain {@code async_delete} of {@code child}'s rows whose {@code column} names a deleted row
   * of {@code parent}: no conditions, no delete limit of its own.
   *
   * @param where where it was defined, for messages ({@code file:line})
   */
  public static LooseForeignKey asyncDelete(
      TableName child, TableName parent, String column, String where) {
    return new LooseForeignKey(
        child,
        parent,
        column,
        OnDelete.ASYNC_DELETE,
        Optional.empty(),
        null,
        List.of(),
        OptionalInt.empty(),
        where);
  }

  /** {@code column = value}, or {@code column IS NULL} when value is null. */
  public record Condition(String column, Object value) {
    public Condition {
      Objects.requireNonNull(column, "column");
    }
  }

  public LooseForeignKey {
    Objects.requireNonNull(child, "child");
    Objects.requireNonNull(parent, "parent");
    Objects.requireNonNull(column, "column");
    Objects.requireNonNull(onDelete, "onDelete");
    Objects.requireNonNull(targetColumn, "targetColumn");
    Objects.requireNonNull(deleteLimit, "deleteLimit");
    Objects.requireNonNull(where, "where");
    conditions = List.copyOf(conditions);
    if (onDelete == OnDelete.UPDATE_COLUMN_TO && targetColumn.isEmpty()) {
      throw new IllegalArgumentException("update_column_to needs a target column");
    }
  }

  /** How messages name it: {@code merge_requests.project_id → projects (async_delete)}. */
  public String describe() {
    return child.displayName()
        + "."
        + column
        + " → "
        + parent.displayName()
        + " ("
        + onDelete.yaml()
        + ")";
  }
}
