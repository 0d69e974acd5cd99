package dev.spillway.bench;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class PacerTest {

  @Test
  void should_space_one_client_s_inserts_by_its_share_of_the_rate() {
    Pacer p = new Pacer(1000, 4, 0, 5_000);
    List<Long> due = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      due.add(p.next());
      p.advance();
    }
    assertThat(due).containsExactly(5_000L, 4_005_000L, 8_005_000L);
  }

  @Test
  void should_spread_the_clients_evenly_over_one_interval() {
    List<Long> due = new ArrayList<>();
    for (int client = 0; client < 4; client++) {
      Pacer p = new Pacer(1000, 4, client, 0);
      for (int i = 0; i < 2; i++) {
        due.add(p.next());
        p.advance();
      }
    }
    assertThat(due.stream().sorted().toList())
        .as("one insert every millisecond across the clients")
        .containsExactly(
            0L, 1_000_000L, 2_000_000L, 3_000_000L, 4_000_000L, 5_000_000L, 6_000_000L, 7_000_000L);
  }

  @Test
  void should_not_move_on_until_the_due_insert_started() {
    Pacer p = new Pacer(10, 1, 0, 0);
    assertThat(p.next()).isEqualTo(p.next()).isZero();
    p.advance();
    assertThat(p.next()).isEqualTo(100_000_000L);
  }

  @Test
  void should_refuse_a_rate_that_is_not_positive_or_a_client_out_of_range() {
    assertThatThrownBy(() -> new Pacer(0, 1, 0, 0)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> new Pacer(Double.NaN, 1, 0, 0))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> new Pacer(10, 2, 2, 0)).isInstanceOf(IllegalArgumentException.class);
  }
}
