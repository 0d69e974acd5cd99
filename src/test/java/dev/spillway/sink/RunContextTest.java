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
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
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
    return context(settings, (db, table) -> health.get());
  }

  private RunContext context(SinkSettings settings, dev.spillway.health.HealthGate gate) {
    return context(settings, gate, clock);
  }

  private RunContext context(
      SinkSettings settings, dev.spillway.health.HealthGate gate, java.time.Clock clock) {
    return new RunContext(
        new Target("main", TableName.parse("t")),
        settings,
        gate,
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
  void should_pause_before_a_runs_first_sub_batch_under_throttle() throws Exception {
    RunContext c =
        context(settings.withThrottle(Duration.ofMillis(200), 0.25, 10), (db, t) -> health.get());
    health.set(new Health.Throttle("wal-rate: fast"));

    long start = System.nanoTime();
    assertThat(c.checkpoint()).isEmpty();

    assertThat(Duration.ofNanos(System.nanoTime() - start))
        .as("a run of one sub-batch waits too")
        .isGreaterThanOrEqualTo(Duration.ofMillis(200));
  }

  @Test
  void should_count_a_runs_time_from_the_end_of_its_first_pause() throws Exception {
    RunContext c =
        context(
            settings
                .withThrottle(Duration.ofMillis(100), 0.25, 10)
                .withLimits(100, Duration.ofMillis(50)),
            (db, t) -> new Health.Throttle("wal-rate: fast"),
            java.time.Clock.systemUTC()); // the time the pause takes

    assertThat(c.checkpoint())
        .as("a pause longer than the run may take, before any work")
        .isEmpty();
  }

  @Test
  void should_end_a_pause_as_soon_as_health_says_stop() {
    RunContext c =
        context(settings.withThrottle(Duration.ofHours(1), 0.25, 10), throttledThenStopped());
    c.subBatchDone(10, 1_000_000); // a second sub-batch is due

    assertThat(checkpointWithin30s(c))
        .as("stopped within the hour's pause")
        .contains(new Outcome.Paused("locks: held"));
  }

  @Test
  void should_never_pause_less_under_throttle_than_when_healthy() {
    RunContext c =
        context(
            settings.withSubBatchPause(Duration.ofHours(1)).withThrottle(Duration.ZERO, 0.25, 10),
            throttledThenStopped());

    assertThat(checkpointWithin30s(c))
        .as("the hour's sub-batch-pause waited before the first too, until STOP ended it")
        .contains(new Outcome.Paused("locks: held"));
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
    assertThat(c.checkpoint()).isEmpty();
    c.subBatchDone(7, 1_000_000);
    clock.advance(Duration.ofSeconds(30));
    assertThat(c.checkpoint()).contains(new Outcome.LimitReached(7, "30 s per run"));
  }

  @Test
  void should_run_the_first_sub_batch_though_getting_to_it_took_the_whole_time() throws Exception {
    RunContext c = context();
    // A slow look-up before the first statement (a loose foreign key's parents in another
    // database) must not end every run before any work.
    clock.advance(Duration.ofSeconds(31));
    assertThat(c.mustEnd()).as("a wait's slices still end at the limit").isPresent();
    assertThat(c.checkpoint()).as("the first sub-batch goes").isEmpty();
    c.subBatchDone(5, 1_000_000);
    assertThat(c.checkpoint()).contains(new Outcome.LimitReached(5, "30 s per run"));
    stopping.set(true);
    assertThat(RunContextTest.this.context().checkpoint())
        .as("a stop still ends it before the first")
        .contains(new Outcome.Paused("worker stopping"));
  }

  @Test
  void should_let_only_one_checkpoint_pass_the_time_limit_though_its_work_found_nothing()
      throws Exception {
    RunContext c = context();
    assertThat(c.checkpoint()).isEmpty();
    // That child table held no row to clean; the next one's look-up is slow.
    clock.advance(Duration.ofSeconds(31));
    assertThat(c.checkpoint()).contains(new Outcome.LimitReached(0, "30 s per run"));
  }

  /** The checkpoint's outcome, taken on another thread and given up after 30 s. */
  private static Optional<Outcome> checkpointWithin30s(RunContext c) {
    return CompletableFuture.supplyAsync(
            () -> {
              try {
                return c.checkpoint();
              } catch (InterruptedException e) {
                throw new IllegalStateException(e);
              }
            })
        .orTimeout(30, TimeUnit.SECONDS)
        .join();
  }

  /** THROTTLE for the first two asks (the checkpoint's own), STOP from the third on. */
  private static dev.spillway.health.HealthGate throttledThenStopped() {
    AtomicInteger asked = new AtomicInteger();
    return (db, t) ->
        asked.incrementAndGet() <= 2
            ? new Health.Throttle("wal-rate: fast")
            : new Health.Stop("locks: held");
  }
}
