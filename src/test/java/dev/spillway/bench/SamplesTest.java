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
  void should_take_samples_added_after_a_percentile_into_the_next() {
    Samples s = new Samples();
    for (long v : new long[] {30, 10, 20}) {
      s.add(v);
    }
    assertThat(s.percentile(50)).isEqualTo(20);
    s.add(5);
    s.add(1);
    assertThat(s.percentile(50)).isEqualTo(10);
    assertThat(s.percentile(0)).isEqualTo(1);
    assertThat(s.max()).isEqualTo(30);
    assertThat(s.mean()).isEqualTo(13.2);
  }

  @Test
  void should_give_zero_without_samples() {
    Samples s = new Samples();
    assertThat(s.mean()).isZero();
    assertThat(s.percentile(50)).isZero();
  }
}
