package dev.spillway.sink;

import dev.spillway.event.TableName;
import java.util.Objects;

/** Where a batch works: the database and table its statements modify, for health gating. */
public record Target(String database, TableName table) {
  public Target {
    Objects.requireNonNull(database, "database");
    Objects.requireNonNull(table, "table");
  }
}
