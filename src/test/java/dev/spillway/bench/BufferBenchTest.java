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
    List<BufferBench.BacklogSample> behind = new ArrayList<>();
    for (int i = 1; i <= 12; i++) {
      behind.add(new BufferBench.BacklogSample(5.0 * i, 2_000L * i));
    }
    assertThat(BufferBench.growth(behind))
        .hasValueSatisfying(g -> assertThat(g).isCloseTo(22_000.0, within(1.0)));
    double allowed = BufferBench.allowedGrowth(1_000, 8_000, Duration.ofMillis(500));
    assertThat(BufferBench.growth(behind).orElseThrow() <= allowed).isFalse();

    // One that keeps up, wavering, a spike of a slow moment in the middle included.
    List<BufferBench.BacklogSample> keepingUp =
        everyFiveSeconds(
            2_100L, 1_800L, 2_300L, 1_900L, 9_000L, 2_000L, 2_200L, 1_700L, 2_400L, 2_000L, 1_900L,
            2_100L);
    assertThat(BufferBench.growth(keepingUp).orElseThrow() <= allowed).isTrue();

    assertThat(BufferBench.growth(everyFiveSeconds(5L, 50_000L, 90_000L)))
        .as("too few samples to judge")
        .isEmpty();
  }

  @Test
  void should_judge_the_trend_over_the_samples_times_the_last_one_sooner_included() {
    // 400 rows more every second, sampled every 5 s of a 22 s load and at its end.
    List<BufferBench.BacklogSample> behind = new ArrayList<>();
    for (double at : new double[] {5, 10, 15, 20, 22}) {
      behind.add(new BufferBench.BacklogSample(at, Math.round(400 * at)));
    }

    assertThat(BufferBench.growth(behind))
        .hasValueSatisfying(g -> assertThat(g).isCloseTo(400.0 * 17, within(1.0)));
  }

  private static List<BufferBench.BacklogSample> everyFiveSeconds(long... rows) {
    List<BufferBench.BacklogSample> out = new ArrayList<>();
    for (int i = 0; i < rows.length; i++) {
      out.add(new BufferBench.BacklogSample(5.0 * (i + 1), rows[i]));
    }
    return out;
  }
}
