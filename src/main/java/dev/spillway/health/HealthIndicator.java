package dev.spillway.health;

import dev.spillway.event.TableName;
import java.sql.Connection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * One signal sampled from PostgreSQL. An indicator instance belongs to one database and may keep
 * state between samples (a rate needs the previous reading). An indicator that throws is reported
 * as {@link Health.Unknown}; it never stops the monitor.
 */
public interface HealthIndicator {
  /** Kebab-case, used in metrics and status. */
  String name();

  /** True when the indicator is read once per table being worked on rather than per database. */
  default boolean perTable() {
    return false;
  }

  /**
   * @param table the table being worked on; null for database-wide indicators
   */
  Health sample(Connection connection, TableName table) throws Exception;

  /**
   * Reads a per-table indicator for every table being worked on in the database, by table; one the
   * answer leaves out reads as UNKNOWN, and an exception makes them all UNKNOWN. By default one
   * {@link #sample} per table; an indicator whose query can take them all overrides it, so a
   * database with hundreds of tables worked on gets one statement per interval, not hundreds.
   */
  default Map<TableName, Health> sampleTables(Connection connection, List<TableName> tables)
      throws Exception {
    Map<TableName, Health> out = new LinkedHashMap<>();
    for (TableName t : tables) {
      out.put(t, sample(connection, t));
    }
    return out;
  }
}
