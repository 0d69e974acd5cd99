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
 * @param txIds id (xid) of the transaction that deleted each of {@code ids}, in their order, 0
 *     where not known (an id a sweep found, or a delete an earlier version captured); empty when
 *     none is known (a batch an earlier version wrote)
 */
public record CleanupBatch(
    String database,
    TableName table,
    List<String> ids,
    long oldestCommitTimeMicros,
    List<Long> txIds) {
  public CleanupBatch {
    Objects.requireNonNull(database, "database");
    Objects.requireNonNull(table, "table");
    ids = List.copyOf(ids);
    txIds = List.copyOf(txIds);
    if (ids.isEmpty()) {
      throw new IllegalArgumentException("A cleanup batch needs at least one id");
    }
    if (!txIds.isEmpty() && txIds.size() != ids.size()) {
      throw new IllegalArgumentException(
          "A cleanup batch of " + ids.size() + " ids with " + txIds.size() + " transaction ids");
    }
  }

  /** A batch whose deleting transactions are not known. */
  public CleanupBatch(
      String database, TableName table, List<String> ids, long oldestCommitTimeMicros) {
    this(database, table, ids, oldestCommitTimeMicros, List.of());
  }

  /** The transaction that deleted the {@code i}th id, 0 when not known. */
  public long txId(int i) {
    return txIds.isEmpty() ? 0 : txIds.get(i);
  }
}
