package dev.spillway.bench;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class PhaseCheckpointTest {
  private final List<String> notes = new ArrayList<>();
  private int asked;

  @Test
  void should_checkpoint_before_every_phase() throws SQLException {
    PhaseCheckpoint checkpoint = new PhaseCheckpoint(() -> asked++, notes::add);

    checkpoint.beforePhase();
    checkpoint.beforePhase();
    checkpoint.beforePhase();

    assertThat(asked).isEqualTo(3);
    assertThat(notes).isEmpty();
  }

  @Test
  void should_say_once_that_no_phase_was_checkpointed_when_the_user_may_not_and_go_on()
      throws SQLException {
    PhaseCheckpoint checkpoint =
        new PhaseCheckpoint(
            () -> {
              asked++;
              throw new SQLException(
                  "ERROR: permission denied to execute CHECKPOINT command",
                  PhaseCheckpoint.INSUFFICIENT_PRIVILEGE);
            },
            notes::add);

    checkpoint.beforePhase();
    checkpoint.beforePhase();
    checkpoint.beforePhase();

    assertThat(asked).as("asked only once").isEqualTo(1);
    assertThat(notes).singleElement().asString().contains("not checkpointed").doesNotContain("\n");
  }

  @Test
  void should_fail_the_phase_on_a_failure_other_than_missing_privilege() {
    PhaseCheckpoint checkpoint =
        new PhaseCheckpoint(
            () -> {
              throw new SQLException("FATAL: terminating connection", "57P01");
            },
            notes::add);

    assertThatThrownBy(checkpoint::beforePhase).hasMessage("FATAL: terminating connection");
    assertThat(notes).isEmpty();
  }
}
