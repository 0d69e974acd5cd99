package dev.spillway.capture;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.sql.SQLException;
import java.sql.SQLTransientConnectionException;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.postgresql.ds.PGSimpleDataSource;

class CaptureSetupExceptionTest {
  @Test
  void should_take_the_databases_refusal_for_a_database_not_ready() {
    SQLException denied = new SQLException("permission denied for database app", "42501");

    assertThat(CaptureSetupException.of("Could not prepare capture: …", denied))
        .isInstanceOf(CaptureSetupException.class)
        .hasCause(denied);
  }

  @Test
  void should_take_a_database_away_or_busy_for_a_runtime_failure() {
    List<Throwable> away =
        List.of(
            new SQLException("Connection to db1:5432 refused.", "08001"),
            new SQLException("terminating connection due to administrator command", "57P01"),
            new SQLException("sorry, too many clients already", "53300"),
            new SQLTransientConnectionException("Connection is not available, request timed out"),
            new org.apache.kafka.common.errors.TimeoutException("Timed out waiting for a node"));

    assertThat(away)
        .allSatisfy(
            cause ->
                assertThat(CaptureSetupException.of("Could not prepare capture: …", cause))
                    .isExactlyInstanceOf(IllegalStateException.class)
                    .hasCause(cause));
  }

  @Test
  void should_not_call_a_database_that_does_not_answer_a_setup_problem() {
    PGSimpleDataSource ds = new PGSimpleDataSource();
    ds.setURL("jdbc:postgresql://127.0.0.1:1/app");

    assertThatThrownBy(() -> SourcePreparation.check("main", ds, List.of(), java.util.Set.of()))
        .isExactlyInstanceOf(IllegalStateException.class)
        .hasMessageStartingWith("Could not check database main for capture: Connection to");
  }
}
