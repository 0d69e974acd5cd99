package dev.spillway.bench;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class ProcStatTest {
  @Test
  void should_read_a_name_with_spaces_and_parentheses_and_the_tick_fields() {
    String line =
        "4163 (C2 (Compiler) x) S 4092 4092 17 0 -1 4194368 1024 0 0 0 123 45 6 7 20 0 1 0 500"
            + " 123456 789 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";

    ProcStat s = ProcStat.parse(line);

    assertThat(s.id()).isEqualTo(4163);
    assertThat(s.name()).isEqualTo("C2 (Compiler) x");
    assertThat(s.parent()).isEqualTo(4092);
    assertThat(s.ownTicks()).isEqualTo(123 + 45);
    assertThat(s.childTicks()).isEqualTo(6 + 7);
  }
}
