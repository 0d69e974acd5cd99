package dev.spillway.bench;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class BufferBenchTest {

  @Test
  void should_print_the_jit_compilers_cpu_of_every_phase_the_plain_one_first() {
    assertThat(BufferBench.jitCpuLine(1.5, 2.25, 13.3))
        .isEqualTo(
            "   of which this process's JIT compilers: plain 1.50, poller 2.25, Spillway 13.30 ms"
                + " per 1,000 inserts");
  }

  @Test
  void should_judge_a_backlog_bounded_by_its_trend_not_by_its_peaks() {
    // A drain keeping up with 95% of 8,000 inserts/s: 400 rows more every second, sampled every
    // 5 s over 60 s. Its last half's peak stays under twice the first's, yet it never stops
    // growing.
    List<Long> behind = new ArrayList<>();
    for (int i = 1; i <= 12; i++) {
      behind.add(2_000L * i);
    }
    assertThat(BufferBench.growth(behind))
        .hasValueSatisfying(g -> assertThat(g).isCloseTo(22_000.0, within(1.0)));
    double allowed = BufferBench.allowedGrowth(1_000, 8_000, Duration.ofMillis(500));
    assertThat(BufferBench.growth(behind).orElseThrow() <= allowed).isFalse();

    // One that keeps up, wavering, a spike of a slow moment in the middle included.
    List<Long> keepingUp =
        List.of(
            2_100L, 1_800L, 2_300L, 1_900L, 9_000L, 2_000L, 2_200L, 1_700L, 2_400L, 2_000L, 1_900L,
            2_100L);
    assertThat(BufferBench.growth(keepingUp).orElseThrow() <= allowed).isTrue();

    assertThat(BufferBench.growth(List.of(5L, 50_000L, 90_000L)))
        .as("too few samples to judge")
        .isEmpty();
  }
}
