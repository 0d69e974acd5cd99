package dev.spillway.sink;

import dev.spillway.support.Causes;
import java.sql.SQLException;
import java.sql.SQLTransientException;

/** Which failures are worth retrying, by PostgreSQL's SQLSTATE class. */
public final class SqlErrors {
  private SqlErrors() {}

  /** Whether the failure came from the database (or reaching it): a SQL error in its chain. */
  public static boolean fromDatabase(Throwable error) {
    return Causes.has(error, SQLException.class);
  }

  /**
   * Whether the failure is PostgreSQL's {@code lock_not_available} (55P03): a statement gave up
   * waiting for a lock at the database's {@code lock_timeout}, or found it taken with NOWAIT. The
   * batch is not at fault; the table is busy.
   */
  public static boolean lockNotAvailable(Throwable error) {
    return Causes.first(
            error, t -> t instanceof SQLException e && LOCK_NOT_AVAILABLE.equals(e.getSQLState()))
        .isPresent();
  }

  private static final String LOCK_NOT_AVAILABLE = "55P03";
  private static final String READ_ONLY_SQL_TRANSACTION = "25006";

  /** A session's idle-in-transaction limit passed: the server closed it. */
  private static final String IDLE_IN_TRANSACTION_TIMEOUT = "25P03";

  /** A transaction's {@code transaction_timeout} passed (PostgreSQL 17): a timeout like any. */
  private static final String TRANSACTION_TIMEOUT = "25P04";

  /**
   * Retryable: connection problems (08), serialization failures and deadlocks (40), insufficient
   * resources (53), operator intervention such as a statement timeout or cancel (57), lock timeouts
   * (55P03), and a database taking no writes (25006: a standby after a failover, or read-only for
   * maintenance; the health monitor puts it at STOP). Everything else (syntax, missing table or
   * column, constraint violations, data errors) fails the same way again and is permanent.
   */
  public static Outcome classify(Throwable error) {
    Throwable sql =
        Causes.first(
                error,
                t ->
                    t instanceof SQLTransientException
                        || t instanceof SQLException e && e.getSQLState() != null)
            .orElse(null);
    if (sql instanceof SQLTransientException) {
      return new Outcome.RetryableFailure(error);
    }
    if (sql != null) {
      String state = ((SQLException) sql).getSQLState();
      if (state.startsWith("08")
          || state.startsWith("40")
          || state.startsWith("53")
          || state.startsWith("57")
          || state.equals(LOCK_NOT_AVAILABLE)
          || state.equals(READ_ONLY_SQL_TRANSACTION)
          || state.equals(IDLE_IN_TRANSACTION_TIMEOUT)
          || state.equals(TRANSACTION_TIMEOUT)) {
        return new Outcome.RetryableFailure(error);
      }
      return new Outcome.PermanentFailure(error);
    }
    if (error instanceof IllegalArgumentException) {
      return new Outcome.PermanentFailure(error);
    }
    return new Outcome.RetryableFailure(error);
  }

  /**
   * {@link #classify(Throwable)}, naming what to dead-letter instead of the record as received
   * should the failure end there: what is left of the batch.
   */
  public static Outcome classify(Throwable error, byte[] deadLetter) {
    return classify(error) instanceof Outcome.PermanentFailure
        ? new Outcome.PermanentFailure(error, deadLetter)
        : new Outcome.RetryableFailure(error, deadLetter);
  }
}
