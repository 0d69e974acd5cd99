package dev.spillway.buffers;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import dev.spillway.event.BufferEvent;
import dev.spillway.event.TableName;
import io.micrometer.core.instrument.MockClock;
import io.micrometer.core.instrument.distribution.HistogramSnapshot;
import io.micrometer.core.instrument.simple.SimpleConfig;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The insert-to-handled figures {@code status} and {@code bench buffers} report. */
class BufferMetricsTest {

  @Test
  void should_report_insert_to_handled_percentiles_within_one_percent() {
    BufferMetrics metrics = new BufferMetrics(new SimpleMeterRegistry(), "b", () -> 0);
    long now = 1_800_000_000_000L;
    List<BufferEvent> events = new ArrayList<>();
    for (int ms = 1; ms <= 1_000; ms++) {
      events.add(event(ms, (now - ms) * 1000, ms, now));
    }
    metrics.handled(events, now, false);

    assertThat(metrics.handledCount()).isEqualTo(1_000);
    assertThat(metrics.percentileMillis(0.5, now)).isCloseTo(500, within(5.0));
    assertThat(metrics.percentileMillis(0.99, now)).isCloseTo(990, within(9.9));
  }

  @Test
  void should_count_replayed_events_without_timing_their_stay_as_dead_letters() {
    BufferMetrics metrics = new BufferMetrics(new SimpleMeterRegistry(), "b", () -> 0);
    long now = 1_800_000_000_000L;
    BufferEvent fresh = event(1, (now - 20) * 1000, 1, now);
    BufferEvent dayOld = event(2, (now - 86_400_000) * 1000, 2, now);
    metrics.handled(List.of(fresh), now, false);
    metrics.handled(List.of(dayOld), now, true);

    assertThat(metrics.handledCount()).isEqualTo(2);
    assertThat(metrics.percentileMillis(0.99, now)).isCloseTo(20, within(1.0));
  }

  @Test
  void should_have_no_percentiles_without_an_event_timed_while_micrometer_surely_keeps_it() {
    MockClock clock = new MockClock();
    BufferMetrics metrics =
        new BufferMetrics(new SimpleMeterRegistry(SimpleConfig.DEFAULT, clock), "b", () -> 0);
    long now = clock.wallTime();
    BufferEvent dayOld = event(2, (now - 86_400_000) * 1000, 2, now);

    assertThat(metrics.percentileMillis(0.5, now)).as("nothing handled").isNull();
    metrics.handled(List.of(dayOld), now, true);
    assertThat(metrics.percentileMillis(0.5, now)).as("only a replayed event").isNull();
    metrics.handled(List.of(), now, false);
    assertThat(metrics.percentileMillis(0.5, now)).as("an empty batch times nothing").isNull();

    BufferEvent fresh = event(1, (now - 20) * 1000, 1, now);
    metrics.handled(List.of(fresh), now, false);
    clock.add(Duration.ofSeconds(80));
    assertThat(metrics.percentileMillis(0.5, clock.wallTime())).isCloseTo(20, within(1.0));
    // Micrometer drops the sample 80-120 s after it was recorded, and then answers 0.
    clock.add(Duration.ofSeconds(20));
    assertThat(metrics.percentileMillis(0.5, clock.wallTime())).as("none lately").isNull();
  }

  @Test
  void should_keep_a_timed_event_in_the_percentiles_and_max_for_the_window_it_was_given() {
    MockClock clock = new MockClock();
    SimpleMeterRegistry registry = new SimpleMeterRegistry(SimpleConfig.DEFAULT, clock);
    BufferMetrics metrics = new BufferMetrics(registry, "b", () -> 0, Duration.ofMinutes(30));
    long now = clock.wallTime();
    metrics.handled(List.of(event(1, (now - 20) * 1000, 1, now)), now, false);

    // Well past the default two minutes, within two thirds of the window given.
    clock.add(Duration.ofMinutes(19));
    HistogramSnapshot s =
        registry.get("spillway_buffer_insert_to_handled").tag("buffer", "b").timer().takeSnapshot();

    assertThat(s.max(TimeUnit.MILLISECONDS)).isCloseTo(20, within(1.0));
    assertThat(s.percentileValues())
        .extracting(v -> v.value(TimeUnit.MILLISECONDS))
        .hasSize(2)
        .allSatisfy(ms -> assertThat(ms).isCloseTo(20, within(1.0)));
    assertThat(metrics.percentileMillis(0.99, clock.wallTime())).isCloseTo(20, within(1.0));
  }

  /** An event of row {@code id} committed at {@code commitMicros}, captured at {@code now}. */
  private static BufferEvent event(int id, long commitMicros, long lsn, long now) {
    return new BufferEvent(
        "db", new TableName("public", "b"), Map.of("id", id), commitMicros, lsn, now, 0);
  }

  @Test
  void should_count_events_the_batching_stage_could_not_read() {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    BufferMetrics metrics = new BufferMetrics(registry, "b", () -> 0);

    metrics.malformed();
    metrics.malformed();

    assertThat(
            registry.get("spillway_buffer_malformed_events").tag("buffer", "b").counter().count())
        .isEqualTo(2.0);
  }
}
