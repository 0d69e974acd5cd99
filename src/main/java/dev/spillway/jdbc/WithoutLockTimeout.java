package dev.spillway.jdbc;

import java.sql.Connection;
import java.sql.SQLException;

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
    Transactions.under(
        c,
        Transactions.NO_LOCK_TIMEOUT,
        () -> {
          work.run();
          return null;
        });
  }
}
