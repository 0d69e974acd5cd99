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
 */
public record DeletedRecord(
    String database,
    TableName table,
    Map<String, Object> key,
    long commitTimeMicros,
    long lsn,
    long capturedAtMillis) {
  public DeletedRecord {
    Objects.requireNonNull(database, "database");
    Objects.requireNonNull(table, "table");
    key = Columns.copy(key);
  }
}
