package dev.spillway.buffers;

import dev.spillway.event.TableName;
import java.util.List;
import java.util.Optional;

/**
 * A buffer table as checked against the catalog: at start-up, and its columns again when they
 * change.
 *
 * @param idColumn its single-column primary key, unquoted
 * @param idType the key's type, for array parameters ({@link BufferStatements#idArray})
 * @param columns every column in table order, unquoted
 */
record BufferTable(
    TableName table,
    String idColumn,
    String idType,
    List<String> columns,
    Optional<TableName> archive) {
  BufferTable {
    columns = List.copyOf(columns);
  }

  BufferTable withColumns(List<String> now) {
    return new BufferTable(table, idColumn, idType, now, archive);
  }

  /** The key column, quoted for SQL. */
  String id() {
    return TableName.quote(idColumn);
  }

  /** Every column, quoted and comma-separated. */
  String columnList() {
    return BufferStatements.quotedList(columns);
  }
}
