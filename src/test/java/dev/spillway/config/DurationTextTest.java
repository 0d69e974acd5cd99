package dev.spillway.config;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import org.junit.jupiter.api.Test;

class DurationTextTest {

  @Test
  void should_format_durations_in_the_form_the_file_accepts() {
    assertThat(DurationText.format(Duration.ZERO)).isEqualTo("0s");
    assertThat(DurationText.format(Duration.ofMillis(1500))).isEqualTo("1500ms");
    assertThat(DurationText.format(Duration.ofSeconds(90))).isEqualTo("90s");
    assertThat(DurationText.format(Duration.ofMinutes(10))).isEqualTo("10m");
    assertThat(DurationText.format(Duration.ofHours(2))).isEqualTo("2h");
    assertThat(DurationText.format(Duration.ofDays(1))).isEqualTo("1d");
    assertThat(DurationText.format(Duration.ofNanos(500))).isEqualTo("PT0.0000005S");
  }

  @Test
  void should_read_back_what_it_formats() {
    for (Duration d :
        new Duration[] {Duration.ofMillis(10), Duration.ofSeconds(61), Duration.ofDays(3)}) {
      assertThat(DurationText.parse(DurationText.format(d))).contains(d);
    }
  }
}
