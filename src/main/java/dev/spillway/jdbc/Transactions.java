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
   * Row security off: a policy that would hide rows from Spillway's role fails the statement
   * ({@code query would be affected by row-level security policy}) rather than making its rows look
   * absent, which for a parent row means deleted.
   */
  public static final String ROW_SECURITY_OFF = "SET LOCAL row_security = off";

  /** No lock timeout: the statements wait for their locks as they would anywhere else. */
  public static final String NO_LOCK_TIMEOUT = "SET LOCAL lock_timeout = 0";

  private Transactions() {}

  /** What runs in the transaction. */
  @FunctionalInterface
  public interface Work<T> {
    T run() throws SQLException;
  }

  /** Runs {@code work} in a transaction that first runs {@code setting}, a {@code SET LOCAL}. */
  public static <T> T under(Connection c, String setting, Work<T> work) throws SQLException {
    c.setAutoCommit(false);
    try {
      try (Statement s = c.createStatement()) {
        s.execute(setting);
      }
      T result = work.run();
      c.commit();
      return result;
    } catch (SQLException | RuntimeException e) {
      c.rollback(); // turning auto-commit back on would commit what is half done
      throw e;
    } finally {
      c.setAutoCommit(true);
    }
  }
}
