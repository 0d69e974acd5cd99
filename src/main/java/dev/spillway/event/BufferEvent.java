package dev.spillway.event;

import java.util.Map;
import java.util.Objects;

/**
 * A row inserted into a captured buffer table.
 *
 * @param database Spillway name of the source database, never null
 * @param table the buffer table
 * @param row every column of the new row, never null; values are null, Boolean, Integer, Long,
 *     Float, Double, String or byte[]
 * @param commitTimeMicros commit time of the inserting transaction
 * @param lsn WAL position of the change
 * @param capturedAtMillis when capture read the change
 * @param txId id (xid) of the inserting transaction; 0 when unknown: for a row a snapshot read
 *     (visible when read), and in events an earlier version wrote
 */
public record BufferEvent(
    String database,
    TableName table,
    Map<String, Object> row,
    long commitTimeMicros,
    long lsn,
    long capturedAtMillis,
    long txId) {
  public BufferEvent {
    Objects.requireNonNull(database, "database");
    Objects.requireNonNull(table, "table");
    row = Columns.copy(row);
  }
}
