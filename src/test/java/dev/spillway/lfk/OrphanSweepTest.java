package dev.spillway.lfk;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class OrphanSweepTest {
  @Test
  void should_order_numeric_ids_by_value_and_others_by_their_text() {
    List<String> numbers = new ArrayList<>(List.of("10", "9", "-3", "100", "2.5"));
    numbers.sort(OrphanSweep.IN_KEY_ORDER);
    assertThat(numbers).containsExactly("-3", "2.5", "9", "10", "100");

    List<String> days = new ArrayList<>(List.of("2026-01-02", "1969-12-31", "2025-12-31"));
    days.sort(OrphanSweep.IN_KEY_ORDER);
    assertThat(days).containsExactly("1969-12-31", "2025-12-31", "2026-01-02");
  }
}
