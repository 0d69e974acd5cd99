package dev.spillway.event;

import java.util.Map;
import java.util.Objects;

/**
 * A row deleted from a captured parent table.
 *
 * @param database Spillway name of the source database, never null
 * @param table the parent table; a partition is reported as its root
 * @param key primary key columns and values, never null; values are null, Boolean, Integer, Long,
 *     Float, Double, String or byte[]
 * @param commitTimeMicros commit time of the deleting transaction
 * @param lsn WAL position of the change
 * @param capturedAtMillis when capture read the change
 * @param txId id (xid) of the deleting transaction, as {@code pg_locks} shows it; 0 when unknown (a
 *     record an earlier version wrote)
 */
public record DeletedRecord(
    String database,
    TableName table,
    Map<String, Object> key,
    long commitTimeMicros,
    long lsn,
    long capturedAtMillis,
    long txId) {
  public DeletedRecord {
    Objects.requireNonNull(database, "database");
    Objects.requireNonNull(table, "table");
    key = Columns.copy(key);
  }

  /** A record whose deleting transaction is not known. */
  public DeletedRecord(
      String database,
      TableName table,
      Map<String, Object> key,
      long commitTimeMicros,
      long lsn,
      long capturedAtMillis) {
    this(database, table, key, commitTimeMicros, lsn, capturedAtMillis, 0);
  }
}
