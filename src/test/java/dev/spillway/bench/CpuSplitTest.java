package dev.spillway.bench;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

class CpuSplitTest {
  @Test
  void should_give_the_database_the_first_half_and_spillway_the_rest() {
    assertThat(CpuSplit.halves(2).database()).isEqualTo("0");
    assertThat(CpuSplit.halves(2).spillway()).isEqualTo("1");
    assertThat(CpuSplit.halves(3).database()).isEqualTo("0");
    assertThat(CpuSplit.halves(3).spillway()).isEqualTo("1-2");
    assertThat(CpuSplit.halves(8).database()).isEqualTo("0-3");
    assertThat(CpuSplit.halves(8).spillway()).isEqualTo("4-7");
    assertThat(CpuSplit.halves(2).onDatabaseCpus()).containsExactly("taskset", "-c", "0");
  }

  @Test
  void should_refuse_a_single_cpu() {
    assertThatThrownBy(() -> CpuSplit.halves(1))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("Separate cores need at least 2 CPUs; this machine has 1.");
  }
}
