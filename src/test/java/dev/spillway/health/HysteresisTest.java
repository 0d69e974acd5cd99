package dev.spillway.health;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.time.Instant;
import org.junit.jupiter.api.Test;

class HysteresisTest {
  private static final Instant T0 = Instant.parse("2026-01-01T00:00:00Z");
  private final Hysteresis h = new Hysteresis(Duration.ofSeconds(30));

  @Test
  void should_get_worse_at_once() {
    assertThat(h.update(new Health.Stop("locks"), T0)).isInstanceOf(Health.Stop.class);
  }

  @Test
  void should_get_better_only_after_the_hold_period() {
    h.update(new Health.Stop("locks"), T0);
    assertThat(h.update(Health.NORMAL, T0.plusSeconds(1))).isInstanceOf(Health.Stop.class);
    assertThat(h.update(Health.NORMAL, T0.plusSeconds(30))).isInstanceOf(Health.Stop.class);
    assertThat(h.update(Health.NORMAL, T0.plusSeconds(31))).isEqualTo(Health.NORMAL);
  }

  @Test
  void should_restart_the_hold_when_it_gets_worse_again() {
    h.update(new Health.Stop("locks"), T0);
    h.update(Health.NORMAL, T0.plusSeconds(20));
    h.update(new Health.Stop("locks again"), T0.plusSeconds(25));
    assertThat(h.update(Health.NORMAL, T0.plusSeconds(51))).isInstanceOf(Health.Stop.class);
    assertThat(h.update(Health.NORMAL, T0.plusSeconds(82))).isEqualTo(Health.NORMAL);
  }

  @Test
  void should_get_better_to_the_worst_of_the_better_samples_and_hold_again_below_it() {
    h.update(new Health.Stop("archive backlog 50"), T0);
    for (int s = 1; s <= 30; s++) {
      h.update(new Health.Throttle("archive backlog 30"), T0.plusSeconds(s));
    }
    assertThat(h.update(Health.NORMAL, T0.plusSeconds(31)))
        .as("30 s of THROTTLE samples lift the STOP to THROTTLE, not to the last sample's NORMAL")
        .isEqualTo(new Health.Throttle("archive backlog 30"));
    assertThat(h.update(Health.NORMAL, T0.plusSeconds(60))).isInstanceOf(Health.Throttle.class);
    assertThat(h.update(Health.NORMAL, T0.plusSeconds(61))).isEqualTo(Health.NORMAL);
  }

  @Test
  void should_combine_to_the_worst_and_name_the_indicator() {
    Health combined =
        Health.worst(
            new Health.Throttle("slow").from("wal-rate"), new Health.Stop("held").from("locks"));
    assertThat(combined).isEqualTo(new Health.Stop("locks: held"));
    assertThat(Health.worst(Health.NORMAL, new Health.Unknown("x")).slowsDown()).isTrue();
    assertThat(new Health.Unknown("x").label()).isEqualTo("UNKNOWN");
  }
}
