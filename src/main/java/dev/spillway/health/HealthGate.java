package dev.spillway.health;

import dev.spillway.event.TableName;

/**
 * What the sinks ask before each sub-batch. Reads are cheap (a published snapshot) and thread-safe.
 */
public interface HealthGate {
  /**
   * The combined state for work on one table of one database (database-wide indicators and the
   * table's own). A table not seen before is watched from the next sample on.
   *
   * @param table null for the database as a whole
   */
  Health state(String database, TableName table);

  /** A gate that is always NORMAL, for tools that run without a monitor. */
  HealthGate ALWAYS_NORMAL = (database, table) -> Health.NORMAL;
}
