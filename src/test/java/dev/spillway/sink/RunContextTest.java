package dev.spillway.sink;

import static org.assertj.core.api.Assertions.assertThat;

import dev.spillway.event.Pipeline;
import dev.spillway.event.TableName;
import dev.spillway.health.Health;
import dev.spillway.health.LatencyWindow;
import dev.spillway.testing.SettableClock;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.time.Instant;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

class RunContextTest {
  private final SettableClock clock = new SettableClock(Instant.parse("2026-01-01T00:00:00Z"));
  private final AtomicReference<Health> health = new AtomicReference<>(Health.NORMAL);
  private final AtomicBoolean stopping = new AtomicBoolean();
  private final SinkSettings settings =
      SinkSettings.defaults()
          .withLimits(100, Duration.ofSeconds(30))
          .withThrottle(Duration.ZERO, 0.25, 10);

  private final LatencyWindow latency = new LatencyWindow(clock, Duration.ofMinutes(1));

  private RunContext context() {
    return new RunContext(
        new Target("main", TableName.parse("t")),
        settings,
        (db, table) -> health.get(),
        clock,
        stopping::get,
        db -> null,
        db -> latency,
        new SinkMetrics(new SimpleMeterRegistry(), Pipeline.LFK));
  }

  @Test
  void should_run_full_size_sub_batches_when_healthy() throws Exception {
    RunContext c = context();
    assertThat(c.checkpoint()).isEmpty();
    assertThat(c.subBatchSize(1000)).isEqualTo(1000);
  }

  @Test
  void should_shrink_sub_batches_to_the_floor_under_throttle_or_unknown() {
    RunContext c = context();
    health.set(new Health.Throttle("wal-rate: fast"));
    assertThat(c.subBatchSize(1000)).isEqualTo(250);
    assertThat(c.subBatchSize(20)).isEqualTo(10);
    assertThat(c.subBatchSize(5)).isEqualTo(5);
    health.set(new Health.Unknown("broken"));
    assertThat(c.subBatchSize(1000)).isEqualTo(250);
  }

  @Test
  void should_end_the_run_paused_on_stop_or_shutdown() throws Exception {
    RunContext c = context();
    health.set(new Health.Stop("locks: held"));
    assertThat(c.checkpoint()).contains(new Outcome.Paused("locks: held"));
    health.set(Health.NORMAL);
    stopping.set(true);
    assertThat(c.checkpoint()).contains(new Outcome.Paused("worker stopping"));
  }

  @Test
  void should_end_the_run_at_the_row_limit() throws Exception {
    RunContext c = context();
    c.subBatchDone(60, 1_000_000);
    assertThat(c.checkpoint()).isEmpty();
    c.subBatchDone(40, 1_000_000);
    assertThat(c.checkpoint()).contains(new Outcome.LimitReached(100, "100 rows per run"));
  }

  @Test
  void should_end_the_run_at_the_time_limit() throws Exception {
    RunContext c = context();
    clock.advance(Duration.ofSeconds(30));
    assertThat(c.checkpoint()).contains(new Outcome.LimitReached(0, "30 s per run"));
  }
}
