package dev.spillway.bench;

import java.sql.SQLException;
import java.util.function.Consumer;
import javax.sql.DataSource;

/**
 * A {@code CHECKPOINT} just before each measured phase, so every phase starts at the same point of
 * the server's checkpoint cycle: a checkpoint landing within one would charge that phase the
 * full-page images written at each page's first change after it. When the server refuses the
 * statement to this user (it needs a superuser or the {@code pg_checkpoint} role), that is said
 * once and no phase is checkpointed. Not thread-safe.
 */
final class PhaseCheckpoint {
  /** SQLSTATE insufficient_privilege. */
  static final String INSUFFICIENT_PRIVILEGE = "42501";

  /** Runs {@code CHECKPOINT}. */
  interface Statement {
    void run() throws SQLException;
  }

  private final Statement checkpoint;
  private final Consumer<String> note;
  private boolean refused;

  /**
   * @param note gets the one line that says the phases were not checkpointed
   */
  PhaseCheckpoint(Statement checkpoint, Consumer<String> note) {
    this.checkpoint = checkpoint;
    this.note = note;
  }

  static PhaseCheckpoint of(DataSource ds, Consumer<String> note) {
    return new PhaseCheckpoint(() -> BenchSql.exec(ds, "CHECKPOINT"), note);
  }

  /**
   * Checkpoints, unless the server refused it before.
   *
   * @throws SQLException when the checkpoint failed for another reason than the user's privileges
   */
  void beforePhase() throws SQLException {
    if (refused) {
      return;
    }
    try {
      checkpoint.run();
    } catch (SQLException e) {
      if (!INSUFFICIENT_PRIVILEGE.equals(e.getSQLState())) {
        throw e;
      }
      refused = true;
      note.accept(
          "CHECKPOINT is refused to this user (it needs a superuser or pg_checkpoint): the"
              + " phases were not checkpointed before they started");
    }
  }
}
