package dev.spillway.sink;

import static org.assertj.core.api.Assertions.assertThat;

import java.sql.SQLException;
import org.junit.jupiter.api.Test;

class SqlErrorsTest {
  private static Outcome classify(String sqlState) {
    return SqlErrors.classify(new RuntimeException(new SQLException("x", sqlState)));
  }

  @Test
  void should_retry_deadlocks_timeouts_and_lost_connections() {
    assertThat(classify("40P01")).isInstanceOf(Outcome.RetryableFailure.class);
    assertThat(classify("40001")).isInstanceOf(Outcome.RetryableFailure.class);
    assertThat(classify("57014")).isInstanceOf(Outcome.RetryableFailure.class);
    assertThat(classify("08006")).isInstanceOf(Outcome.RetryableFailure.class);
    assertThat(classify("55P03")).isInstanceOf(Outcome.RetryableFailure.class);
    assertThat(classify("53300")).isInstanceOf(Outcome.RetryableFailure.class);
    assertThat(classify("25006"))
        .as("a standby after a failover")
        .isInstanceOf(Outcome.RetryableFailure.class);
    assertThat(classify("25P04"))
        .as("a role's transaction_timeout")
        .isInstanceOf(Outcome.RetryableFailure.class);
    assertThat(classify("25P03"))
        .as("a role's idle_in_transaction_session_timeout")
        .isInstanceOf(Outcome.RetryableFailure.class);
  }

  @Test
  void should_not_retry_what_fails_the_same_way_again() {
    assertThat(classify("42P01")).isInstanceOf(Outcome.PermanentFailure.class);
    assertThat(classify("42703")).isInstanceOf(Outcome.PermanentFailure.class);
    assertThat(classify("23503")).isInstanceOf(Outcome.PermanentFailure.class);
    assertThat(classify("22P02")).isInstanceOf(Outcome.PermanentFailure.class);
    assertThat(SqlErrors.classify(new IllegalArgumentException("bad")))
        .isInstanceOf(Outcome.PermanentFailure.class);
  }

  @Test
  void should_carry_what_to_dead_letter_whichever_kind_the_failure_is() {
    byte[] rest = {1, 2};
    Outcome retried = SqlErrors.classify(new SQLException("x", "40001"), rest);
    Outcome refused = SqlErrors.classify(new SQLException("x", "23503"), rest);
    assertThat(retried)
        .isInstanceOfSatisfying(
            Outcome.RetryableFailure.class, f -> assertThat(f.deadLetter()).isSameAs(rest));
    assertThat(refused)
        .isInstanceOfSatisfying(
            Outcome.PermanentFailure.class, f -> assertThat(f.deadLetter()).isSameAs(rest));
  }

  @Test
  void should_tell_a_lock_wait_given_up_from_other_failures() {
    assertThat(
            SqlErrors.lockNotAvailable(
                new RuntimeException(new SQLException("lock timeout", "55P03"))))
        .isTrue();
    assertThat(SqlErrors.lockNotAvailable(new SQLException("statement timeout", "57014")))
        .isFalse();
    assertThat(SqlErrors.lockNotAvailable(new IllegalStateException("no SQL"))).isFalse();
  }
}
