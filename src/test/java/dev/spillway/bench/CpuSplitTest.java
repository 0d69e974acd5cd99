package dev.spillway.bench;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import org.junit.jupiter.api.Test;

class CpuSplitTest {
  @Test
  void should_give_the_database_the_first_half_and_spillway_the_rest() {
    assertThat(CpuSplit.halves(List.of(0, 1)).database()).isEqualTo("0");
    assertThat(CpuSplit.halves(List.of(0, 1)).spillway()).isEqualTo("1");
    assertThat(CpuSplit.halves(List.of(0, 1, 2)).database()).isEqualTo("0");
    assertThat(CpuSplit.halves(List.of(0, 1, 2)).spillway()).isEqualTo("1-2");
    assertThat(CpuSplit.halves(CpuSplit.parse("0-7")).database()).isEqualTo("0-3");
    assertThat(CpuSplit.halves(CpuSplit.parse("0-7")).spillway()).isEqualTo("4-7");
    assertThat(CpuSplit.halves(List.of(0, 1)).onDatabaseCpus())
        .containsExactly("taskset", "-c", "0");
  }

  @Test
  void should_split_the_cpus_this_process_may_use_not_those_from_zero() {
    CpuSplit split = CpuSplit.halves(CpuSplit.parse("4-7"));
    assertThat(split.database()).isEqualTo("4-5");
    assertThat(split.spillway()).isEqualTo("6-7");
    CpuSplit gaps = CpuSplit.halves(CpuSplit.parse("0,2,4-6,9"));
    assertThat(gaps.database()).isEqualTo("0,2,4");
    assertThat(gaps.spillway()).isEqualTo("5-6,9");
  }

  @Test
  void should_read_cpu_lists_as_the_kernel_writes_them() {
    assertThat(CpuSplit.parse("0")).containsExactly(0);
    assertThat(CpuSplit.parse("0-3,8,10-11")).containsExactly(0, 1, 2, 3, 8, 10, 11);
    assertThat(CpuSplit.allowed()).as("this process's CPUs").isNotEmpty().isSorted();
  }

  @Test
  void should_refuse_a_split_without_the_tool_to_make_it() throws Exception {
    assertThatThrownBy(() -> CpuSplit.requireSplittable(List.of(0, 1), "no-such-taskset"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage(
            "Separate cores need no-such-taskset (util-linux), which does not run here; install"
                + " it or leave --separate-cores out.");
    assertThatThrownBy(() -> CpuSplit.requireSplittable(List.of(0), "true"))
        .hasMessageStartingWith("Separate cores need at least 2 CPUs");
    CpuSplit.requireSplittable(List.of(0, 1), "true"); // a tool that runs: taken
  }

  @Test
  void should_refuse_a_single_cpu() {
    assertThatThrownBy(() -> CpuSplit.halves(List.of(3)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("Separate cores need at least 2 CPUs; this machine has 1.");
  }
}
