package dev.spillway.lfk;

import dev.spillway.event.TableName;
import java.sql.Array;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Types;
import java.util.stream.Collectors;

/**
 * The SQL of one loose foreign key: a statement that modifies at most {@code LIMIT} child rows
 * referencing any of the deleted parent ids, in a locking pass that skips locked rows and a
 * blocking pass that waits for them. Identifiers come from the checked definitions and are quoted;
 * ids, limits and values are bind parameters. Each statement is idempotent: once a row is deleted
 * or updated, it no longer matches.
 */
final class CleanupStatements {
  private final CheckedKey key;
  private final String skipLocked;
  private final String blocking;

  CleanupStatements(CheckedKey key) {
    this.key = key;
    this.skipLocked = build(true);
    this.blocking = build(false);
  }

  String sql(boolean skipLockedPass) {
    return skipLockedPass ? skipLocked : blocking;
  }

  /**
   * Binds one execution: the value to set (update_column_to), the ids, the value again to skip rows
   * that already hold it, condition values, then the limit. Values go as untyped text, so
   * PostgreSQL gives them the type of the column they meet.
   */
  void bind(PreparedStatement ps, Array ids, int limit) throws SQLException {
    LooseForeignKey k = key.key();
    int i = 1;
    boolean setsValue = k.onDelete() == OnDelete.UPDATE_COLUMN_TO && k.targetValue() != null;
    if (setsValue) {
      ps.setObject(i++, String.valueOf(k.targetValue()), Types.OTHER);
    }
    ps.setArray(i++, ids);
    if (setsValue) {
      ps.setObject(i++, String.valueOf(k.targetValue()), Types.OTHER);
    }
    for (LooseForeignKey.Condition c : k.conditions()) {
      if (c.value() != null) {
        ps.setObject(i++, String.valueOf(c.value()), Types.OTHER);
      }
    }
    ps.setInt(i, limit);
  }

  private String build(boolean skipLockedPass) {
    LooseForeignKey k = key.key();
    String child = k.child().quoted();
    String pk =
        key.childPrimaryKey().stream().map(TableName::quote).collect(Collectors.joining(", "));
    String column = TableName.quote(k.column());
    StringBuilder where =
        new StringBuilder(column)
            .append(" = ANY (CAST(? AS ")
            .append(key.columnType())
            .append("[]))");
    String set;
    switch (k.onDelete()) {
      case ASYNC_NULLIFY -> set = column + " = NULL";
      case UPDATE_COLUMN_TO -> {
        String target = TableName.quote(k.targetColumn().orElseThrow());
        if (k.targetValue() == null) {
          set = target + " = NULL";
          where.append(" AND ").append(target).append(" IS NOT NULL");
        } else {
          set = target + " = ?";
          where.append(" AND ").append(target).append(" IS DISTINCT FROM ?");
        }
      }
      default -> set = null;
    }
    for (LooseForeignKey.Condition c : k.conditions()) {
      where.append(" AND ").append(TableName.quote(c.column()));
      where.append(c.value() == null ? " IS NULL" : " = ?");
    }
    String select =
        "SELECT "
            + pk
            + " FROM "
            + child
            + " WHERE "
            + where
            + " LIMIT ? FOR UPDATE"
            + (skipLockedPass ? " SKIP LOCKED" : "");
    String rows = "(" + pk + ") IN (" + select + ")";
    if (set == null) {
      return "DELETE FROM " + child + " WHERE " + rows;
    }
    return "UPDATE " + child + " SET " + set + " WHERE " + rows;
  }
}
