package dev.spillway.event;

import java.util.List;
import java.util.Objects;

/**
 * Deleted rows of one loose-foreign-key parent table, grouped for cleanup of their children.
 *
 * @param database Spillway name of the parent's database
 * @param table the parent; a partitioned parent by its root
 * @param ids primary keys of the deleted rows as text (never empty)
 * @param oldestCommitTimeMicros commit time of the earliest delete in the batch
 */
public record CleanupBatch(
    String database, TableName table, List<String> ids, long oldestCommitTimeMicros) {
  public CleanupBatch {
    Objects.requireNonNull(database, "database");
    Objects.requireNonNull(table, "table");
    ids = List.copyOf(ids);
    if (ids.isEmpty()) {
      throw new IllegalArgumentException("A cleanup batch needs at least one id");
    }
  }
}
