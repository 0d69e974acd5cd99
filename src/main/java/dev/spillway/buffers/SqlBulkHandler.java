package dev.spillway.buffers;

import dev.spillway.sink.Outcome;
import dev.spillway.sink.SqlErrors;
import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.util.List;
import javax.sql.DataSource;

/**
 * The SQL handler: one statement per batch in the buffer's database, in its own transaction, with
 * {@code :ids} bound to the array of the batch's ids (the primary key's type) and {@code :group_id}
 * to its group id ({@link SqlParameters}: not inside literals or comments). All or none: a
 * statement that fails is retried unless its error is permanent, and may run again after a crash,
 * so it should be idempotent ({@code ON CONFLICT DO NOTHING}). Thread-safe.
 */
final class SqlBulkHandler implements BulkHandler {
  private final DataSource dataSource;
  private final SqlParameters statement;
  private final String idType;

  /**
   * @param idType the primary key's type as {@code pg_type.typname}, for the array parameter
   */
  SqlBulkHandler(DataSource dataSource, String statement, String idType) {
    this.dataSource = dataSource;
    this.idType = idType;
    this.statement = SqlParameters.parse(statement);
  }

  @Override
  public Result handle(Batch batch) throws Exception {
    try (Connection c = dataSource.getConnection();
        PreparedStatement ps = c.prepareStatement(statement.sql())) {
      Array ids = BufferStatements.idArray(c, idType, batch.ids());
      List<String> parameters = statement.names();
      for (int i = 0; i < parameters.size(); i++) {
        if (parameters.get(i).equals("ids")) {
          ps.setArray(i + 1, ids); // :ids, the batch's primary keys
        } else {
          ps.setString(i + 1, batch.groupId()); // :group_id, the idempotency key
        }
      }
      ps.execute();
      return Result.success();
    } catch (SQLException e) {
      String reason = "SQL handler failed: " + e.getMessage();
      return SqlErrors.classify(e) instanceof Outcome.PermanentFailure
          ? Result.reject(reason)
          : Result.retry(reason);
    }
  }
}
