package dev.spillway.lfk;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import org.junit.jupiter.api.Test;

class OrphanSweepTest {
  @Test
  void should_order_ids_by_value_when_all_are_numbers_and_else_by_their_text() {
    assertThat(OrphanSweep.inKeyOrder(List.of("10", "9", "-3", "100", "2.5", "007")))
        .containsExactly("-3", "2.5", "007", "9", "10", "100");
    assertThat(OrphanSweep.inKeyOrder(List.of("2026-01-02", "1969-12-31", "2025-12-31")))
        .containsExactly("1969-12-31", "2025-12-31", "2026-01-02");
    // One id that is no number: all by text, whatever the order they came in.
    assertThat(OrphanSweep.inKeyOrder(List.of("2", "1a", "10"))).containsExactly("10", "1a", "2");
    assertThat(OrphanSweep.inKeyOrder(List.of("1a", "10", "2"))).containsExactly("10", "1a", "2");
  }
}
