package dev.spillway.bench;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.util.ArrayList;
import java.util.List;
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

  @Test
  void should_read_back_what_it_wrote_in_order() throws Exception {
    Samples s = new Samples();
    s.add(3);
    s.add(1);
    s.add(2);
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    s.writeTo(new DataOutputStream(bytes));
    Samples read =
        Samples.readFrom(new DataInputStream(new ByteArrayInputStream(bytes.toByteArray())), 3);
    List<Long> values = new ArrayList<>();
    read.forEach(values::add);
    assertThat(values).containsExactly(3L, 1L, 2L);
  }
}
