package dev.spillway.buffers;

import dev.spillway.jdbc.Transactions;
import dev.spillway.sink.Outcome;
import dev.spillway.sink.SqlErrors;
import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import javax.sql.DataSource;
import org.postgresql.util.PSQLException;
import org.postgresql.util.ServerErrorMessage;

/**
 * The SQL handler: one statement per batch in the buffer's database, in its own transaction, with
 * {@code :ids} bound to the array of the batch's ids (the primary key's type) and {@code :group_id}
 * to its group id ({@link SqlParameters}: not inside literals or comments). All or none: a
 * statement that fails is retried unless its error is permanent, and may run again after a crash,
 * so it should be idempotent ({@code ON CONFLICT DO NOTHING}). Thread-safe. Closing it cancels the
 * statements still running, so none goes on in the database after Spillway has stopped (and runs
 * beside its own next delivery).
 */
final class SqlBulkHandler implements BulkHandler {
  private final DataSource dataSource;
  private final SqlParameters statement;
  private final String idType;

  /** What the statement's transaction sets first: no lock timeout, and its own timeout if any. */
  private final String settings;

  /** The statements running now, canceled by {@link #close()}. */
  private final Set<Statement> running = ConcurrentHashMap.newKeySet();

  private volatile boolean closed;

  /**
   * @param idType the primary key's type, for the array parameter ({@link
   *     BufferStatements#idArray})
   * @param timeout how long the statement may run before PostgreSQL cancels it; zero for no limit
   */
  SqlBulkHandler(DataSource dataSource, String statement, String idType, Duration timeout) {
    this.dataSource = dataSource;
    this.idType = idType;
    this.statement = SqlParameters.parse(statement);
    this.settings =
        Transactions.NO_LOCK_TIMEOUT
            + (timeout.isZero()
                ? ""
                : "; SET LOCAL statement_timeout = " + Math.max(1, timeout.toMillis()));
  }

  /**
   * Has PostgreSQL parse and analyze the statement, its parameters typed as a batch binds them,
   * without running it: a misspelt statement, or one naming a table or column that does not exist,
   * is refused before any batch meets it (and, dead-lettered, has its rows deleted).
   *
   * @return PostgreSQL's refusal in one line, or empty when it takes the statement
   * @throws SQLException when the database could not be asked
   */
  Optional<String> refusal() throws SQLException {
    try (Connection c = dataSource.getConnection();
        PreparedStatement ps = c.prepareStatement(statement.sql())) {
      bind(c, ps, List.of(), "");
      ps.getParameterMetaData(); // a describe: parse and analysis only
      return Optional.empty();
    } catch (SQLException e) {
      return refusal(e, true);
    }
  }

  /**
   * What PostgreSQL said, in one line, of a statement it refused to parse or analyze; rethrows any
   * other failure (the database could not be asked).
   *
   * @param where whether to say at which character of the statement: of the user's, not of
   *     Spillway's own
   */
  static Optional<String> refusal(SQLException e, boolean where) throws SQLException {
    if (!(SqlErrors.classify(e) instanceof Outcome.PermanentFailure)) {
      throw e;
    }
    ServerErrorMessage m = e instanceof PSQLException p ? p.getServerErrorMessage() : null;
    if (m == null || m.getMessage() == null) {
      return Optional.of(e.getMessage().lines().findFirst().orElse(""));
    }
    return Optional.of(
        m.getMessage()
            + (where && m.getPosition() > 0 ? " (at character " + m.getPosition() + ")" : ""));
  }

  @Override
  public Result handle(Batch batch) throws Exception {
    try (Connection c = dataSource.getConnection();
        PreparedStatement ps = c.prepareStatement(statement.sql())) {
      // The statement is the user's work, as a call to a receiver is: it waits for the locks it
      // needs, as it would anywhere else, rather than fail at Spillway's own lock timeout; only
      // the handler's own timeout, when set, bounds it (canceled: a failed call, retried).
      Transactions.under(
          c,
          settings,
          () -> {
            bind(c, ps, batch.ids(), batch.groupId());
            running.add(ps);
            try {
              if (closed) { // closed as the statement was being made: cancel() missed it
                throw new SQLException("the buffer's handler is closed", "57014");
              }
              return ps.execute();
            } finally {
              running.remove(ps);
            }
          });
      return Result.success();
    } catch (SQLException e) {
      String reason = "SQL handler failed: " + e.getMessage();
      return SqlErrors.classify(e) instanceof Outcome.PermanentFailure
          ? Result.reject(reason)
          : Result.retry(reason);
    }
  }

  /**
   * Cancels the statements still running: called once the sink has stopped, when the batches in
   * hand have had their grace; theirs run again at the next start.
   */
  @Override
  public void close() throws InterruptedException {
    closed = true;
    // Asked again while any is left: a statement on its way to the database (past the closed
    // check, not sent yet) is not canceled by the driver, and PostgreSQL drops a cancel that
    // comes before the statement.
    long until = System.nanoTime() + CANCEL_FOR.toNanos();
    while (!running.isEmpty() && System.nanoTime() < until) {
      for (Statement s : running) {
        try {
          s.cancel();
        } catch (SQLException e) {
          // The database cannot be reached to be asked: the statement's own timeout, if any,
          // ends it.
        }
      }
      Thread.sleep(CANCEL_AGAIN.toMillis());
    }
  }

  /** How long {@link #close()} goes on canceling, and how often it asks. */
  private static final Duration CANCEL_FOR = Duration.ofSeconds(2);

  private static final Duration CANCEL_AGAIN = Duration.ofMillis(50);

  /** {@code :ids} as an array of the key's type, {@code :group_id} as text. */
  private void bind(Connection c, PreparedStatement ps, List<Object> ids, String groupId)
      throws SQLException {
    Array array = BufferStatements.idArray(c, idType, ids);
    List<String> parameters = statement.names();
    for (int i = 0; i < parameters.size(); i++) {
      if (parameters.get(i).equals("ids")) {
        ps.setArray(i + 1, array); // :ids, the batch's primary keys
      } else {
        ps.setString(i + 1, groupId); // :group_id, the idempotency key
      }
    }
  }
}
