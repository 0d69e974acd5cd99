package dev.spillway.testing;

import static org.awaitility.Awaitility.await;

import dev.spillway.config.DatabaseConfig;
import dev.spillway.jdbc.DatabaseEndpoint;
import dev.spillway.jdbc.Databases;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import javax.sql.DataSource;
import org.postgresql.PGConnection;

/** Plain SQL for test set-up and checks. */
public final class TestSql {
  private TestSql() {}

  public static void exec(DataSource ds, String... statements) {
    try (Connection c = ds.getConnection();
        Statement s = c.createStatement()) {
      for (String sql : statements) {
        s.execute(sql);
      }
    } catch (SQLException e) {
      throw new IllegalStateException(e);
    }
  }

  public static long count(DataSource ds, String query) {
    try (Connection c = ds.getConnection();
        Statement s = c.createStatement();
        ResultSet rs = s.executeQuery(query)) {
      rs.next();
      return rs.getLong(1);
    } catch (SQLException e) {
      throw new IllegalStateException(e);
    }
  }

  /** The first column of the first row, as text. */
  public static String text(DataSource ds, String query) {
    try (Connection c = ds.getConnection();
        Statement s = c.createStatement();
        ResultSet rs = s.executeQuery(query)) {
      rs.next();
      return rs.getString(1);
    } catch (SQLException e) {
      throw new IllegalStateException(e);
    }
  }

  /**
   * A connection whose open transaction holds the table in {@code ACCESS EXCLUSIVE} mode, so any
   * other session's statement on it waits; closing the connection frees it.
   */
  public static Connection lockTable(DataSource ds, String table) throws SQLException {
    return inTransaction(ds, "LOCK TABLE " + table + " IN ACCESS EXCLUSIVE MODE");
  }

  /**
   * A connection in a transaction that ran {@code statements} and stays open (holding their locks,
   * an id once one wrote) until the caller commits, rolls back or closes it.
   */
  public static Connection inTransaction(DataSource ds, String... statements) throws SQLException {
    Connection c = ds.getConnection();
    try (Statement s = c.createStatement()) {
      c.setAutoCommit(false);
      for (String sql : statements) {
        s.execute(sql);
      }
    } catch (SQLException e) {
      c.close();
      throw e;
    }
    return c;
  }

  /** Waits until exactly one session whose statement begins with this text waits on a lock. */
  public static void awaitWaitingOnLock(DataSource ds, String statementStart) {
    await()
        .atMost(Duration.ofSeconds(30))
        .until(() -> sessions(ds, statementStart, "wait_event_type = 'Lock'") == 1);
  }

  /**
   * Pools for {@code database} as {@code role}, whose password tests set to {@code pw}, under the
   * name {@code name}: for what another role's rights or policies change.
   */
  public static Databases databasesAs(
      DatabaseEndpoint database, String name, String role, Duration lockTimeout) {
    return new Databases(
        List.of(new DatabaseEndpoint(name, database.url(), role, "pw", 2, lockTimeout)),
        new SimpleMeterRegistry());
  }

  /** The same, with the default lock timeout. */
  public static Databases databasesAs(DatabaseEndpoint database, String name, String role) {
    return databasesAs(database, name, role, DatabaseConfig.DEFAULT_LOCK_TIMEOUT);
  }

  /** The server process of a connection's session. */
  public static int pid(Connection c) throws SQLException {
    return c.unwrap(PGConnection.class).getBackendPID();
  }

  /** A query of the pids of the sessions waiting for a lock that session {@code pid} holds. */
  public static String blockedBy(long pid) {
    return "SELECT pid FROM pg_stat_activity WHERE " + pid + " = ANY (pg_blocking_pids(pid))";
  }

  /** Waits until exactly one session waits for a lock that session {@code pid} holds. */
  public static void awaitBlockedBy(DataSource ds, long pid) {
    await()
        .atMost(Duration.ofSeconds(60))
        .pollInterval(Duration.ofMillis(10))
        .until(() -> count(ds, "SELECT count(*) FROM (" + blockedBy(pid) + ") b") == 1);
  }

  /** Sessions whose (last) statement begins with this text and that meet the condition. */
  public static long sessions(DataSource ds, String statementStart, String condition) {
    return count(
        ds,
        "SELECT count(*) FROM pg_stat_activity WHERE starts_with(query, '"
            + statementStart.replace("'", "''")
            + "') AND "
            + condition);
  }

  /** A table name no other test uses: the prefix and eight random hex digits. */
  public static String uniqueName(String prefix) {
    return prefix + "_" + UUID.randomUUID().toString().replace("-", "").substring(0, 8);
  }

  /**
   * Runs {@code body} while a server-wide setting holds ({@code ALTER SYSTEM}, reloaded), and
   * resets it after, however the body ends: the server is shared by the suite.
   */
  public static void withSystemSetting(DataSource ds, String name, String value, Runnable body) {
    exec(
        ds,
        "ALTER SYSTEM SET " + name + " = '" + value.replace("'", "''") + "'",
        "SELECT pg_reload_conf()");
    try {
      body.run();
    } finally {
      exec(ds, "ALTER SYSTEM RESET " + name, "SELECT pg_reload_conf()");
    }
  }

  /**
   * Makes the server invalidate a logical replication slot, as it does one holding more WAL than
   * {@code max_slot_wal_keep_size}: that limit set to nothing for a moment (server-wide), WAL
   * written and switched past the slot, and checkpoints until the slot shows as lost. Refused while
   * another slot is in use, which would be invalidated too.
   */
  public static void invalidateSlot(DataSource ds, String slot) {
    // Every slot behind is invalidated with it: none other may be in use.
    String others =
        text(
            ds,
            "SELECT string_agg(slot_name, ', ') FROM pg_replication_slots WHERE active AND slot_name"
                + " <> '"
                + slot
                + "'");
    if (others != null) {
      throw new IllegalStateException("Slots in use would be invalidated too: " + others);
    }
    withSystemSetting(
        ds,
        "max_slot_wal_keep_size",
        "0",
        () -> {
          await()
              .atMost(Duration.ofSeconds(60))
              .alias("slot " + slot + " invalidated")
              .until(
                  () -> {
                    exec(
                        ds,
                        "SELECT pg_logical_emit_message(false, 'spillway-test', 'wal')",
                        "SELECT pg_switch_wal()",
                        "CHECKPOINT");
                    return "lost"
                        .equals(
                            text(
                                ds,
                                "SELECT wal_status FROM pg_replication_slots WHERE slot_name = '"
                                    + slot
                                    + "'"));
                  });
        });
  }

  /**
   * Drops a test's replication slot and publication so the shared server does not keep WAL, and the
   * slot's signal table.
   */
  public static void dropCapture(DataSource ds, String slot) {
    exec(
        ds,
        "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
            + " WHERE slot_name = '"
            + slot
            + "' AND NOT active",
        "DROP PUBLICATION IF EXISTS \"" + slot + "\"",
        "DROP TABLE IF EXISTS spillway.\"" + slot + "_signal\"");
  }
}
