package dev.spillway.bench;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class CaptureBenchTest {

  @Test
  void should_insert_the_rate_asked_each_second_whatever_it_is() {
    for (int rate : new int[] {1, 50, 250, 5_099, 100_000}) {
      for (int second = 0; second < 3; second++) {
        long rows = 0;
        for (long tick = second * 100L; tick < (second + 1) * 100L; tick++) {
          int n = CaptureBench.rowsAtTick(rate, tick);
          assertThat(n).isBetween(rate / 100, rate / 100 + 1);
          rows += n;
        }
        assertThat(rows).as("rows in second %d at --rate %d", second, rate).isEqualTo(rate);
      }
    }
  }
}
