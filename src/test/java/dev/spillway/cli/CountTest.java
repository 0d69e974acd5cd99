package dev.spillway.cli;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class CountTest {
  @Test
  void should_name_one_thing_in_the_singular_and_any_other_number_in_the_plural() {
    assertThat(Count.of(1, "parent table", "parent tables")).isEqualTo("1 parent table");
    assertThat(Count.of(0, "batch", "batches")).isEqualTo("0 batches");
    assertThat(Count.of(12, "batch", "batches")).isEqualTo("12 batches");
  }
}
