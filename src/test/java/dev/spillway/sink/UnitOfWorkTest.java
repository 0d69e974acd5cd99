package dev.spillway.sink;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.spillway.config.ConfigLoader;
import dev.spillway.event.Pipeline;
import dev.spillway.health.Health;
import dev.spillway.health.HealthGate;
import dev.spillway.health.LatencyWindow;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.sql.SQLException;
import java.time.Clock;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import java.util.stream.Stream;
import org.apache.kafka.clients.producer.MockProducer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

class UnitOfWorkTest {
  private final MockProducer<byte[], byte[]> producer =
      new MockProducer<>(true, null, new ByteArraySerializer(), new ByteArraySerializer());
  private final AtomicInteger runs = new AtomicInteger();
  private final SimpleMeterRegistry registry = new SimpleMeterRegistry();

  /** What the handler's {@code requeued} hook throws, if anything. */
  private RuntimeException requeuedFails;

  /** A unit whose every run pauses having done part of the batch, naming the rest. */
  private UnitOfWork pausingWithRest() {
    return endingWith(new Outcome.Paused("worker stopping", "rest".getBytes()));
  }

  /** A unit whose every run ends with {@code outcome}, its database always NORMAL, no retries. */
  private UnitOfWork endingWith(Outcome outcome) {
    return endingWith(
        outcome,
        HealthGate.ALWAYS_NORMAL,
        SinkSettings.defaults().withRetries(0, Duration.ofMillis(1)));
  }

  /** A unit whose every run ends with {@code outcome}, counting its runs in {@link #runs}. */
  private UnitOfWork endingWith(Outcome outcome, HealthGate gate, SinkSettings settings) {
    return running(context -> outcome, gate, settings);
  }

  /** A unit whose every run is {@code body} on table {@code main.t}, counted in {@link #runs}. */
  private UnitOfWork running(
      Function<RunContext, Outcome> body, HealthGate gate, SinkSettings settings) {
    Clock clock = Clock.systemUTC();
    BatchHandler handler =
        new BatchHandler() {
          @Override
          public Optional<Target> target(SinkRecord record) {
            return Optional.of(new Target("main", dev.spillway.event.TableName.parse("t")));
          }

          @Override
          public Outcome execute(SinkRecord record, RunContext context) {
            runs.incrementAndGet();
            return body.apply(context);
          }

          @Override
          public void requeued(SinkRecord record, int attempts, boolean delayed) {
            if (requeuedFails != null) {
              throw requeuedFails;
            }
          }
        };
    return new UnitOfWork(
        handler,
        settings,
        gate,
        new Requeuer(producer, "t.delayed", "t.dlq", clock),
        new SinkMetrics(registry, Pipeline.BUFFERS),
        clock,
        db -> null,
        db -> new LatencyWindow(clock, Duration.ofMinutes(1)));
  }

  private static SinkRecord record() {
    return new SinkRecord("t.batches", 0, 7, "k".getBytes(), "whole".getBytes(), 1, Map.of());
  }

  @Test
  void should_put_back_the_rest_of_a_paused_run_and_commit() {
    UnitOfWork.Result r = pausingWithRest().run(record(), () -> true, () -> false);

    assertThat(r.commit()).isTrue();
    assertThat(producer.history()).hasSize(1);
    assertThat(new String(producer.history().get(0).value())).isEqualTo("rest");
    assertThat(producer.history().get(0).topic()).isEqualTo("t.batches");
  }

  @Test
  void should_put_back_the_rest_kafka_refused_at_the_next_run_rather_than_run_the_batch_again() {
    UnitOfWork unit = pausingWithRest();
    producer.sendException = new org.apache.kafka.common.errors.TimeoutException("Kafka away");

    UnitOfWork.Result refused = unit.run(record(), () -> false, () -> false);
    assertThat(refused.commit()).as("nothing went back: the batch stays").isFalse();

    producer.sendException = null;
    UnitOfWork.Result again = unit.run(record(), () -> false, () -> false);

    assertThat(again.commit()).isTrue();
    assertThat(runs).as("its done part not run again").hasValue(1);
    assertThat(producer.history())
        .singleElement()
        .satisfies(r -> assertThat(new String(r.value())).isEqualTo("rest"));

    unit.run(record(), () -> false, () -> false);
    assertThat(runs).as("put back once: a later run of that position runs").hasValue(2);
    SinkRecord another =
        new SinkRecord("t.batches", 0, 7, "k".getBytes(), "another".getBytes(), 1, Map.of());
    producer.sendException = new org.apache.kafka.common.errors.TimeoutException("Kafka away");
    unit.run(record(), () -> false, () -> false);
    producer.sendException = null;
    unit.run(another, () -> false, () -> false);
    assertThat(runs)
        .as("another batch at the same position (its topic made again) runs, not the old rest")
        .hasValue(4);
  }

  @Test
  void should_step_aside_as_its_rest_a_batch_whose_rest_kafka_refused() {
    Target stopped = new Target("main", dev.spillway.event.TableName.parse("t"));
    HealthGate gate = (db, table) -> new dev.spillway.health.Health.Stop("an operator's switch");
    UnitOfWork unit =
        endingWith(
            new Outcome.Paused("worker stopping", "rest".getBytes()),
            gate,
            SinkSettings.defaults());
    producer.sendException = new org.apache.kafka.common.errors.TimeoutException("Kafka away");
    assertThat(unit.run(record(), () -> false, () -> false).commit()).isFalse();
    producer.sendException = null;

    UnitOfWork.Result aside = unit.stepAside(record(), stopped, () -> false);

    assertThat(aside.commit()).isTrue();
    assertThat(producer.history())
        .singleElement()
        .satisfies(r -> assertThat(new String(r.value())).isEqualTo("rest"));
  }

  @Test
  void should_commit_a_batch_put_back_though_the_handlers_hook_then_fails() {
    requeuedFails = new IllegalStateException("a counter of the pipeline's broke");

    UnitOfWork.Result r = pausingWithRest().run(record(), () -> true, () -> false);

    assertThat(r.commit()).as("its rest is in Kafka: this run must not come again").isTrue();
    assertThat(producer.history()).hasSize(1);
  }

  @Test
  void should_count_an_attempt_per_unfinished_run_and_start_again_from_none_once_delayed() {
    SinkSettings settings = SinkSettings.defaults().withAttempts(3, Duration.ofMinutes(10));
    Outcome limit = new Outcome.LimitReached(10, "max-rows-per-run");
    UnitOfWork work = endingWith(limit, HealthGate.ALWAYS_NORMAL, settings);

    work.run(withAttempts(1), () -> false, () -> false);
    work.run(withAttempts(2), () -> false, () -> false);

    assertThat(producer.history())
        .extracting(d -> d.topic(), d -> SinkHeaders.attempts(headers(d)))
        .containsExactly(
            org.assertj.core.groups.Tuple.tuple("t.batches", 2),
            org.assertj.core.groups.Tuple.tuple("t.delayed", 0));
  }

  @Test
  void should_step_a_batch_aside_with_its_attempts_for_consume_after_or_step_aside_after() {
    Target stopped = new Target("main", dev.spillway.event.TableName.parse("t"));
    HealthGate gate = (db, table) -> new dev.spillway.health.Health.Stop("an operator's switch");
    SinkSettings settings =
        SinkSettings.defaults()
            .withAttempts(3, Duration.ofSeconds(10))
            .withStepAsideAfter(Duration.ofMinutes(1));
    long before = System.currentTimeMillis();

    UnitOfWork.Result r =
        endingWith(new Outcome.Done(0), gate, settings)
            .stepAside(withAttempts(2), stopped, () -> false);

    assertThat(r.commit()).isTrue();
    Map<String, byte[]> h = headers(producer.history().get(0));
    assertThat(producer.history().get(0).topic()).isEqualTo("t.delayed");
    assertThat(SinkHeaders.attempts(h)).isEqualTo(2);
    assertThat(SinkHeaders.text(h.get(SinkHeaders.STEPPED_ASIDE)))
        .isEqualTo("public.t is at STOP: an operator's switch");
    assertThat(SinkHeaders.consumeAfter(producer.history().get(0).headers()) - before)
        .as("a minute, though consume-after is 10 s: a table that stays at STOP")
        .isBetween(60_000L, 70_000L);
  }

  @Test
  void should_keep_a_batch_kafka_would_not_take_aside_waiting_for_its_table() {
    Target stopped = new Target("main", dev.spillway.event.TableName.parse("t"));
    HealthGate gate = (db, table) -> new dev.spillway.health.Health.Stop("an operator's switch");
    producer.sendException =
        new org.apache.kafka.common.errors.RecordTooLargeException("too large");

    UnitOfWork.Result r =
        endingWith(new Outcome.Done(0), gate, SinkSettings.defaults())
            .stepAside(withAttempts(0), stopped, () -> false);

    assertThat(r.commit()).isFalse();
    assertThat(r.outcome()).isInstanceOf(Outcome.RetryableFailure.class);
    assertThat(r.waitFor()).isEqualTo(stopped);
  }

  private static SinkRecord withAttempts(int attempts) {
    return new SinkRecord(
        "t.batches", 0, 7, "k".getBytes(), "whole".getBytes(), attempts, Map.of());
  }

  /** Every way a run ends that puts a copy of its batch somewhere. */
  static Stream<Outcome> copying() {
    return Stream.of(
        new Outcome.Paused("worker stopping", "rest".getBytes()),
        new Outcome.LimitReached(10, "max-rows-per-run"),
        new Outcome.RetryableFailure(new SQLException("connection lost", "08006")),
        new Outcome.PermanentFailure(new IllegalArgumentException("malformed"), null));
  }

  @ParameterizedTest
  @MethodSource("copying")
  void should_put_no_copy_of_a_batch_anywhere_once_its_partition_is_given_up(Outcome outcome) {
    UnitOfWork.Result r = endingWith(outcome).run(record(), () -> true, () -> true);

    assertThat(r.commit()).isFalse();
    assertThat(producer.history()).as("its new owner runs the record").isEmpty();
  }

  @ParameterizedTest
  @MethodSource("copying")
  void should_put_a_copy_of_a_batch_it_still_owns_where_its_ending_says(Outcome outcome) {
    UnitOfWork.Result r = endingWith(outcome).run(record(), () -> false, () -> false);

    assertThat(r.commit()).isTrue();
    assertThat(producer.history()).hasSize(1);
  }

  @ParameterizedTest
  @MethodSource("copying")
  void should_put_a_copy_where_its_ending_says_while_the_worker_stops_but_for_a_failure(
      Outcome outcome) {
    UnitOfWork.Result r = endingWith(outcome).run(record(), () -> true, () -> false);

    boolean failure = outcome instanceof Outcome.RetryableFailure;
    assertThat(r.commit()).isEqualTo(!failure);
    assertThat(producer.history()).hasSize(failure ? 0 : 1);
  }

  /**
   * Attempts that handled part of the batch, each naming what it left, then one failing before it
   * could tell.
   */
  static Stream<Outcome> failingWithoutRest() {
    return Stream.of(
        new Outcome.RetryableFailure(new SQLException("pool exhausted", "08001")),
        new Outcome.PermanentFailure(new SQLException("permission denied", "42501")));
  }

  @ParameterizedTest
  @MethodSource("failingWithoutRest")
  void should_dead_letter_the_rest_an_earlier_attempt_left_when_the_last_cannot_tell(Outcome last) {
    AtomicInteger attempt = new AtomicInteger();
    UnitOfWork.Result r =
        running(
                context ->
                    switch (attempt.incrementAndGet()) {
                      case 1 ->
                          new Outcome.RetryableFailure(
                              new SQLException("connection lost", "08006"), "more".getBytes());
                      case 2 ->
                          new Outcome.RetryableFailure(
                              new SQLException("connection lost", "08006"), "rest".getBytes());
                      default -> last;
                    },
                HealthGate.ALWAYS_NORMAL,
                SinkSettings.defaults().withRetries(2, Duration.ofMillis(1)))
            .run(record(), () -> false, () -> false);

    assertThat(r.commit()).isTrue();
    assertThat(attempt).hasValue(3);
    assertThat(producer.history())
        .singleElement()
        .satisfies(d -> assertThat(d.topic()).isEqualTo("t.dlq"))
        .satisfies(
            d ->
                assertThat(new String(d.value()))
                    .as("what the last attempt that could tell left, not the whole batch")
                    .isEqualTo("rest"));
  }

  @Test
  void should_dead_letter_a_failure_not_from_the_database_even_at_stop() {
    HealthGate stopped = (database, table) -> new Health.Stop("wraparound autovacuum");
    UnitOfWork.Result r =
        endingWith(
                new Outcome.RetryableFailure(new IllegalStateException("a defect")),
                stopped,
                SinkSettings.defaults().withRetries(0, Duration.ofMillis(1)))
            .run(record(), () -> false, () -> false);

    assertThat(r.commit()).isTrue();
    assertThat(producer.history())
        .singleElement()
        .satisfies(d -> assertThat(d.topic()).isEqualTo("t.dlq"));
  }

  @Test
  void should_leave_a_batch_failing_while_its_database_is_at_stop_in_kafka_with_retries_unspent() {
    HealthGate unreachable =
        (database, table) -> new Health.Stop("database main unreachable: Connection refused");
    UnitOfWork.Result r =
        endingWith(
                new Outcome.RetryableFailure(new SQLException("I/O error", "08006")),
                unreachable,
                SinkSettings.defaults())
            .run(record(), () -> false, () -> false);

    assertThat(r.outcome())
        .isEqualTo(new Outcome.Paused("database main unreachable: Connection refused"));
    assertThat(r.commit()).isFalse();
    assertThat(producer.history()).as("neither dead-lettered nor delayed").isEmpty();
    assertThat(runs).as("no retry while at STOP").hasValue(1);
  }

  @Test
  void should_wait_for_the_table_it_failed_on_when_a_batch_works_on_several() {
    Target ci = new Target("ci", dev.spillway.event.TableName.parse("ci_pipelines"));
    HealthGate ciUnreachable =
        (database, table) ->
            database.equals("ci")
                ? new Health.Stop("database ci unreachable: Connection refused")
                : Health.NORMAL;
    UnitOfWork.Result r =
        running(
                context -> {
                  context.forTarget(ci).dataSource(); // its statements on ci fail
                  return new Outcome.RetryableFailure(new SQLException("I/O error", "08006"));
                },
                ciUnreachable,
                SinkSettings.defaults())
            .run(record(), () -> false, () -> false);

    assertThat(r.outcome())
        .isEqualTo(new Outcome.Paused("database ci unreachable: Connection refused"));
    assertThat(r.commit()).isFalse();
    assertThat(r.waitFor()).as("the worker holds it while ci is at STOP").isEqualTo(ci);
    assertThat(producer.history()).isEmpty();
  }

  @Test
  void should_run_its_retries_when_retry_backoff_max_equals_retry_backoff() {
    SinkSettings fixed =
        ConfigLoader.parse(
                "sink:\n  max-retries: 2\n  retry-backoff: 1ms\n  retry-backoff-max: 1ms\n",
                "spillway.yml",
                Path.of("."),
                name -> null)
            .sink();
    AtomicInteger failing = new AtomicInteger(2);
    UnitOfWork.Result r =
        running(
                context ->
                    failing.getAndDecrement() > 0
                        ? new Outcome.RetryableFailure(new SQLException("I/O error", "08006"))
                        : new Outcome.Done(5),
                HealthGate.ALWAYS_NORMAL,
                fixed)
            .run(record(), () -> false, () -> false);

    assertThat(r.outcome()).isEqualTo(new Outcome.Done(5));
    assertThat(runs).as("two retries, then done").hasValue(3);
    assertThat(producer.history()).isEmpty();
  }

  @Test
  @Timeout(10) // the retry's wait is 20 s: only a wait that looks at the stop ends in time
  void should_end_a_retry_wait_as_soon_as_the_worker_stops() throws InterruptedException {
    Thread unitThread = Thread.currentThread();
    java.util.concurrent.atomic.AtomicBoolean stopping =
        new java.util.concurrent.atomic.AtomicBoolean();
    // The stop comes while the batch waits for its retry: once this thread waits with a timeout.
    Thread stopper =
        new Thread(
            () -> {
              await()
                  .atMost(Duration.ofSeconds(10))
                  .pollInterval(Duration.ofMillis(1))
                  .until(() -> unitThread.getState() == Thread.State.TIMED_WAITING);
              stopping.set(true);
            });
    stopper.setDaemon(true);
    UnitOfWork unit =
        running(
            context -> {
              if (!stopper.isAlive() && runs.get() == 1) {
                stopper.start();
              }
              return new Outcome.RetryableFailure(new SQLException("I/O error", "08006"));
            },
            HealthGate.ALWAYS_NORMAL,
            SinkSettings.defaults().withRetries(5, Duration.ofSeconds(20)));

    UnitOfWork.Result r;
    try {
      r = unit.run(record(), stopping::get, () -> false);
    } finally {
      stopper.join(10_000);
    }

    assertThat(r.outcome()).isEqualTo(new Outcome.Paused("worker stopping"));
    assertThat(r.commit()).isFalse();
    assertThat(runs).as("no retry run after the stop").hasValue(1);
    assertThat(producer.history()).isEmpty();
  }

  @Test
  void should_leave_a_batch_failing_while_the_worker_stops_to_the_next_owner() {
    UnitOfWork.Result r =
        endingWith(
                new Outcome.RetryableFailure(new SQLException("I/O error", "08006")),
                HealthGate.ALWAYS_NORMAL,
                SinkSettings.defaults())
            .run(record(), () -> true, () -> false);

    assertThat(r.outcome()).isEqualTo(new Outcome.Paused("worker stopping"));
    assertThat(r.commit()).isFalse();
    assertThat(producer.history()).isEmpty();
  }

  @Test
  void should_delay_a_batch_whose_run_gave_up_a_lock_wait_longer_each_time_in_a_row() {
    UnitOfWork unit =
        running(
            context -> {
              throw new IllegalStateException(
                  "cleanup failed",
                  new SQLException("canceling statement due to lock timeout", "55P03"));
            },
            HealthGate.ALWAYS_NORMAL,
            SinkSettings.defaults().withRetries(3, Duration.ofSeconds(1)));

    long before = System.currentTimeMillis();
    UnitOfWork.Result r = unit.run(record(), () -> false, () -> false);
    // Its second run in a row: as the first left it on the delay topic.
    UnitOfWork.Result again =
        unit.run(
            new SinkRecord(
                "t.batches",
                0,
                8,
                "k".getBytes(),
                "whole".getBytes(),
                1,
                Map.of(SinkHeaders.LOCK_WAITS, SinkHeaders.intValue(1))),
            () -> false,
            () -> false);

    assertThat(r.outcome()).isEqualTo(new Outcome.LockTimeout(0, "public.t"));
    assertThat(r.commit()).isTrue();
    assertThat(again.commit()).isTrue();
    assertThat(runs).as("not retried in place").hasValue(2);
    assertThat(producer.history())
        .as("neither put back at once nor dead-lettered")
        .hasSize(2)
        .allSatisfy(
            d -> {
              assertThat(d.topic()).isEqualTo("t.delayed");
              assertThat(new String(d.value())).isEqualTo("whole");
              assertThat(SinkHeaders.attempts(headers(d))).as("attempts not counted").isEqualTo(1);
            });
    long[] waits =
        producer.history().stream()
            .mapToLong(
                d ->
                    ByteBuffer.wrap(d.headers().lastHeader(SinkHeaders.CONSUME_AFTER).value())
                            .getLong()
                        - before)
            .toArray();
    assertThat(waits[0]).as("the retry backoff").isBetween(1_000L, 1_000L + 5_000);
    assertThat(waits[1]).as("doubled").isBetween(2_000L, 2_000L + 5_000);
    assertThat(producer.history().stream().map(d -> SinkHeaders.lockWaits(headers(d))).toList())
        .containsExactly(1, 2);
    assertThat(
            registry
                .get("spillway_sink_lock_timeouts")
                .tags("pipeline", "buffers", "database", "main", "table", "public.t")
                .counter()
                .count())
        .isEqualTo(2.0);
  }

  @Test
  void should_wait_no_longer_than_a_delayed_batch_however_often_a_lock_was_held() {
    UnitOfWork unit =
        endingWith(
            new Outcome.Done(0),
            HealthGate.ALWAYS_NORMAL,
            SinkSettings.defaults()
                .withRetries(3, Duration.ofSeconds(1))
                .withAttempts(3, Duration.ofMinutes(10)));
    assertThat(unit.lockBackoff(1)).isEqualTo(Duration.ofSeconds(1));
    assertThat(unit.lockBackoff(4)).isEqualTo(Duration.ofSeconds(8));
    assertThat(unit.lockBackoff(10)).isEqualTo(Duration.ofSeconds(512));
    assertThat(unit.lockBackoff(11)).isEqualTo(Duration.ofMinutes(10));
    assertThat(unit.lockBackoff(1_000)).isEqualTo(Duration.ofMinutes(10));
  }

  private static Map<String, byte[]> headers(
      org.apache.kafka.clients.producer.ProducerRecord<byte[], byte[]> d) {
    Map<String, byte[]> out = new java.util.HashMap<>();
    d.headers().forEach(h -> out.put(h.key(), h.value()));
    return out;
  }

  @Test
  void should_dead_letter_a_permanent_failure_even_at_stop() {
    HealthGate stopped = (database, table) -> new Health.Stop("wraparound autovacuum");
    UnitOfWork.Result r =
        endingWith(
                new Outcome.PermanentFailure(new SQLException("no such column", "42703"), null),
                stopped,
                SinkSettings.defaults())
            .run(record(), () -> false, () -> false);

    assertThat(r.commit()).isTrue();
    assertThat(producer.history())
        .singleElement()
        .satisfies(d -> assertThat(d.topic()).isEqualTo("t.dlq"));
  }
}
