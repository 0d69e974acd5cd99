package dev.spillway.buffers;

import static org.assertj.core.api.Assertions.assertThat;

import dev.spillway.event.TableName;
import java.time.Duration;
import org.junit.jupiter.api.Test;

class BufferSettingsTest {
  private final BufferSettings settings =
      BufferSettings.of("events", TableName.parse("events"), "main", new HandlerSpec.Sql(":ids"));

  @Test
  void should_wait_what_a_retry_names_within_bounds_and_the_backoff_when_it_names_none() {
    assertThat(settings.retryWait(1, Duration.ofSeconds(3))).isEqualTo(Duration.ofSeconds(3));
    assertThat(settings.retryWait(1, Duration.ofSeconds(-5)))
        .as("a time already passed: at once")
        .isZero();
    assertThat(settings.retryWait(1, Duration.ofDays(2))).isEqualTo(BufferSettings.MAX_RETRY_AFTER);
    assertThat(settings.retryWait(3, null)).isEqualTo(settings.backoff(3)).isPositive();
  }
}
