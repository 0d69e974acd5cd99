package dev.spillway.health;

import static org.assertj.core.api.Assertions.assertThat;

import dev.spillway.testing.SettableClock;
import java.time.Duration;
import java.time.Instant;
import org.junit.jupiter.api.Test;

class LatencyWindowTest {
  @Test
  void should_report_p95_of_recent_samples_only() {
    SettableClock clock = new SettableClock(Instant.parse("2026-01-01T00:00:00Z"));
    LatencyWindow w = new LatencyWindow(clock, Duration.ofMinutes(1));
    assertThat(w.p95Seconds()).isNaN();
    for (int i = 1; i <= 100; i++) {
      w.record(Duration.ofMillis(i));
    }
    assertThat(w.p95Seconds()).isEqualTo(0.095);
    clock.advance(Duration.ofSeconds(61));
    w.record(Duration.ofMillis(500));
    assertThat(w.p95Seconds()).isEqualTo(0.5);
  }
}
