package dev.spillway.cli;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class BuffersCommandTest {
  @Test
  void should_name_a_count_above_100_000_as_the_estimate_it_is() {
    assertThat(BuffersCommand.rows(1)).isEqualTo("the 1 row");
    assertThat(BuffersCommand.rows(2)).isEqualTo("the 2 rows");
    assertThat(BuffersCommand.rows(100_000)).isEqualTo("the 100,000 rows");
    assertThat(BuffersCommand.rows(2_345_678)).isEqualTo("about 2,345,678 rows");
  }
}
