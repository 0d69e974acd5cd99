package dev.spillway.jdbc;

import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;

/**
 * Work on a pooled connection in one transaction without the pool's lock timeout: for statements
 * that must wait for the locks they need, as they would anywhere else (capture's set-up, a user's
 * own statement), rather than fail at Spillway's limit. Committed when it returns, rolled back when
 * it throws; the connection is left in auto-commit, with the pool's lock timeout again.
 */
public final class WithoutLockTimeout {
  private WithoutLockTimeout() {}

  /** What runs in the transaction. */
  @FunctionalInterface
  public interface Work {
    void run() throws SQLException;
  }

  public static void run(Connection c, Work work) throws SQLException {
    c.setAutoCommit(false);
    try {
      try (Statement s = c.createStatement()) {
        s.execute("SET LOCAL lock_timeout = 0");
      }
      work.run();
      c.commit();
    } catch (SQLException | RuntimeException e) {
      c.rollback(); // turning auto-commit back on would commit what is half done
      throw e;
    } finally {
      c.setAutoCommit(true);
    }
  }
}
