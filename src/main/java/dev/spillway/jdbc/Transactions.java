package dev.spillway.jdbc;

import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;

/**
 * Work on a pooled connection in one transaction under a setting of its own ({@code SET LOCAL}):
 * committed when it returns, rolled back when it throws, the connection then back in auto-commit
 * with the pool's settings.
 */
public final class Transactions {
  /**
   * Row security off: a statement on a table whose row-level security applies to Spillway's role
   * fails ({@code query would be affected by row-level security policy}), whatever its policies,
   * rather than a policy making rows look absent, which for a parent row means deleted.
   */
  public static final String ROW_SECURITY_OFF = "SET LOCAL row_security = off";

  /**
   * Row security off ({@link #ROW_SECURITY_OFF}) at {@code READ COMMITTED}, whatever the role's or
   * database's default (and, being the transaction's own, through a pooler sharing server
   * connections per transaction too): each statement sees what sessions it waited for committed.
   */
  public static final String ROW_SECURITY_OFF_READ_COMMITTED =
      "SET TRANSACTION ISOLATION LEVEL READ COMMITTED; " + ROW_SECURITY_OFF;

  /** No lock timeout: the statements wait for their locks as they would anywhere else. */
  public static final String NO_LOCK_TIMEOUT = "SET LOCAL lock_timeout = 0";

  /**
   * The ids ({@code id}, 32 bits as a bigint) of the transactions running now: each holds the lock
   * on its own id until its work is visible to other sessions, which is later than its commit
   * reaching the WAL (a session waiting for a synchronous standby, say).
   */
  public static final String RUNNING_TRANSACTIONS =
      "SELECT transactionid::text::bigint AS id FROM pg_locks"
          + " WHERE locktype = 'transactionid' AND mode = 'ExclusiveLock' AND granted";

  private Transactions() {}

  /** What runs in the transaction. */
  @FunctionalInterface
  public interface Work<T> {
    T run() throws SQLException;
  }

  /**
   * Runs {@code work} in a transaction that first runs {@code setting} ({@code SET LOCAL}, or
   * several {@code SET} statements). A failure to roll back or to turn auto-commit on again after
   * {@code work} failed is added to its failure as suppressed, never in its place.
   */
  public static <T> T under(Connection c, String setting, Work<T> work) throws SQLException {
    c.setAutoCommit(false);
    T result;
    try {
      try (Statement s = c.createStatement()) {
        s.execute(setting);
      }
      result = work.run();
      c.commit();
    } catch (Throwable failed) {
      // Turning auto-commit back on would commit what is half done: roll back first, whatever
      // failed (an Error included).
      try {
        c.rollback();
        c.setAutoCommit(true);
      } catch (SQLException | RuntimeException also) {
        failed.addSuppressed(also);
      }
      throw failed;
    }
    c.setAutoCommit(true);
    return result;
  }
}
