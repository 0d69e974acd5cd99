package dev.spillway.ops;

import static org.assertj.core.api.Assertions.assertThat;

import dev.spillway.ops.ConsumerLag.Lag;
import org.junit.jupiter.api.Test;

class ConsumerLagGaugesTest {
  @Test
  void should_give_an_unknown_age_rather_than_none_when_records_wait() {
    long now = 1_000_000;
    assertThat(ConsumerLagGauges.ageSeconds(new Lag("g", "t", 1, 0, null, 1), now))
        .as("none waits")
        .isZero();
    assertThat(ConsumerLagGauges.ageSeconds(new Lag("g", "t", 1, 5, now - 60_000, 1), now))
        .isEqualTo(60.0);
    assertThat(ConsumerLagGauges.ageSeconds(new Lag("g", "t", 1, 5, null, 1), now))
        .as("5 wait, the oldest not read in time")
        .isNaN();
  }
}
