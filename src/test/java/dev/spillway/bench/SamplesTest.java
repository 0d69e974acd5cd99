package dev.spillway.bench;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class SamplesTest {

  @Test
  void should_give_the_mean_and_nearest_rank_percentiles() {
    Samples s = new Samples();
    for (long v = 1; v <= 100; v++) {
      s.add(v);
    }
    assertThat(s.mean()).isEqualTo(50.5);
    assertThat(s.percentile(50)).isEqualTo(50);
    assertThat(s.percentile(99)).isEqualTo(99);
    assertThat(s.max()).isEqualTo(100);
  }

  @Test
  void should_give_zero_without_samples() {
    Samples s = new Samples();
    assertThat(s.mean()).isZero();
    assertThat(s.percentile(50)).isZero();
  }
}
