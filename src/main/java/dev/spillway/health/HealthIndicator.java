package dev.spillway.health;

import dev.spillway.event.TableName;
import java.sql.Connection;

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
}
