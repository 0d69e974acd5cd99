package dev.spillway.bench;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.PrintWriter;
import java.io.StringWriter;
import org.junit.jupiter.api.Test;

class ComparisonTest {
  private static String printed(Comparison c) {
    StringWriter s = new StringWriter();
    c.print(new PrintWriter(s));
    return s.toString();
  }

  @Test
  void should_print_each_figure_with_its_ratio_to_the_first() {
    String out = printed(new Comparison("throughput", "tx/s").add("plain", 200).add("other", 150));
    assertThat(out.lines().toList())
        .containsExactly(
            String.format("   %-44s %12s %8s", "throughput", "tx/s", "ratio"),
            String.format("   %-44s %12.2f %8s", "plain", 200.0, "1.00"),
            String.format("   %-44s %12.2f %8s", "other", 150.0, "0.75"));
  }

  @Test
  void should_print_no_ratio_to_a_baseline_of_zero() {
    String out = printed(new Comparison("full-page images", "pages").add("plain", 0).add("x", 3));
    assertThat(out).doesNotContain("Infinity").doesNotContain("NaN");
    assertThat(out.lines().skip(1).map(l -> l.substring(l.length() - 1)).toList())
        .containsExactly("-", "-");
  }
}
