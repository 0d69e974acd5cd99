package dev.spillway.buffers;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.spillway.event.TableName;
import dev.spillway.sink.Outcome;
import dev.spillway.sink.SinkHeaders;
import dev.spillway.sink.SinkRecord;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class RunningBufferTest {
  private static final TableName TABLE = TableName.parse("events");
  private static final BulkHandler.Batch BATCH =
      new BulkHandler.Batch("events", "g-1", 1, "id", List.of(Map.of("id", 1)));

  private static RunningBuffer buffer(BulkHandler handler) {
    return buffer(BufferSettings.of("events", TABLE, "main", new HandlerSpec.Sql(":ids")), handler);
  }

  private static RunningBuffer buffer(BufferSettings s, BulkHandler handler) {
    return new RunningBuffer(
        s,
        new BufferTable(TABLE, "id", "int8", List.of("id"), Optional.empty()),
        handler,
        new BufferMetrics(new SimpleMeterRegistry(), s.name(), () -> 0));
  }

  /**
   * Calls the buffer once on a thread of its own, started; what the call throws goes to {@code
   * failed}.
   */
  private static Thread callingOnItsOwnThread(RunningBuffer b, List<String> failed) {
    Thread call =
        new Thread(
            () -> {
              try {
                b.call(BATCH, () -> {});
              } catch (Exception e) {
                failed.add(e.toString());
              }
            });
    call.start();
    return call;
  }

  /** A handler that succeeds and runs {@code onClose} when closed. */
  private static BulkHandler closing(Runnable onClose) {
    return new BulkHandler() {
      @Override
      public Result handle(Batch batch) {
        return Result.success();
      }

      @Override
      public void close() {
        onClose.run();
      }
    };
  }

  private static BulkHandler throwing(Supplier<Throwable> thrown) {
    return batch -> {
      Throwable t = thrown.get();
      if (t instanceof Error e) {
        throw e;
      }
      throw (RuntimeException) t;
    };
  }

  @Test
  void should_give_back_every_permit_after_calls_waited_longer_than_a_slice_for_one()
      throws Exception {
    int inFlight = BufferSettings.DEFAULT_MAX_IN_FLIGHT;
    AtomicInteger running = new AtomicInteger();
    AtomicInteger most = new AtomicInteger();
    AtomicInteger waits = new AtomicInteger();
    AtomicReference<CountDownLatch> go = new AtomicReference<>(new CountDownLatch(1));
    RunningBuffer b =
        buffer(
            batch -> {
              most.accumulateAndGet(running.incrementAndGet(), Math::max);
              go.get().await(30, TimeUnit.SECONDS);
              running.decrementAndGet();
              return BulkHandler.Result.success();
            });
    ExecutorService pool = Executors.newCachedThreadPool();
    try {
      List<Future<BulkHandler.Result>> first = new ArrayList<>();
      for (int i = 0; i < inFlight + 2; i++) {
        first.add(pool.submit(() -> b.call(BATCH, waits::incrementAndGet)));
      }
      // Two calls wait for a permit, giving up a 100 ms slice twice or more between them.
      await().atMost(Duration.ofSeconds(10)).until(() -> waits.get() >= 4);
      assertThat(running.get()).isEqualTo(inFlight);
      go.get().countDown();
      for (Future<BulkHandler.Result> r : first) {
        assertThat(r.get(10, TimeUnit.SECONDS)).isInstanceOf(BulkHandler.Result.Success.class);
      }
      assertThat(most.get()).isEqualTo(inFlight);

      // Every permit came back: max-in-flight calls run at once again.
      go.set(new CountDownLatch(1));
      List<Future<BulkHandler.Result>> again = new ArrayList<>();
      for (int i = 0; i < inFlight; i++) {
        again.add(pool.submit(() -> b.call(BATCH, () -> {})));
      }
      await().atMost(Duration.ofSeconds(10)).until(() -> running.get() == inFlight);
      go.get().countDown();
      for (Future<BulkHandler.Result> r : again) {
        assertThat(r.get(10, TimeUnit.SECONDS)).isInstanceOf(BulkHandler.Result.Success.class);
      }
    } finally {
      go.get().countDown();
      pool.shutdownNow();
    }
  }

  /**
   * A class handler whose call, blocked as in socket I/O, an interrupt does not end: it answers
   * once {@link #answer} counts down. What it saw goes to {@link #seen}.
   */
  private static final class DeafHandler implements BulkHandler {
    final CountDownLatch inCall = new CountDownLatch(1);
    final CountDownLatch answer = new CountDownLatch(1);
    final List<String> seen = new java.util.concurrent.CopyOnWriteArrayList<>();
    private final AtomicInteger calling = new AtomicInteger();

    @Override
    public Result handle(Batch batch) {
      calling.incrementAndGet();
      inCall.countDown();
      while (answer.getCount() > 0) {
        try {
          answer.await();
        } catch (InterruptedException ignored) {
          seen.add("interrupted");
        }
      }
      calling.decrementAndGet();
      return Result.success();
    }

    @Override
    public void close() {
      seen.add(calling.get() == 0 ? "closed after its calls" : "closed during a call");
    }

    /** A buffer of this class handler, one call of it under way, interrupted as a stop does. */
    RunningBuffer calledAndInterrupted() throws InterruptedException {
      RunningBuffer b =
          buffer(
              BufferSettings.of(
                  "events", TABLE, "main", new HandlerSpec.JavaClass(BulkHandler.class)),
              this);
      Thread call = callingOnItsOwnThread(b, seen);
      assertThat(inCall.await(10, TimeUnit.SECONDS)).isTrue();
      call.interrupt();
      await().atMost(Duration.ofSeconds(10)).until(() -> seen.contains("interrupted"));
      return b;
    }
  }

  @Test
  void should_close_a_class_handler_after_its_call_under_way_ends_even_one_deaf_to_interrupts()
      throws Exception {
    DeafHandler deaf = new DeafHandler();
    RunningBuffer b = deaf.calledAndInterrupted();

    Thread closing =
        new Thread(() -> BufferBatchHandler.closeHandlers(List.of(b), Duration.ofSeconds(30)));
    closing.start();
    closing.join(300);
    assertThat(closing.isAlive()).as("waits for the call under way").isTrue();
    deaf.answer.countDown();
    closing.join(10_000);

    assertThat(deaf.seen).containsExactly("interrupted", "closed after its calls");
  }

  @Test
  void should_close_a_class_handler_all_the_same_once_its_wait_is_over() throws Exception {
    DeafHandler deaf = new DeafHandler();
    RunningBuffer b = deaf.calledAndInterrupted();
    try {
      BufferBatchHandler.closeHandlers(List.of(b), Duration.ofMillis(200));

      assertThat(deaf.seen).containsExactly("interrupted", "closed during a call");
    } finally {
      deaf.answer.countDown();
    }
  }

  @Test
  void should_close_a_built_in_handler_at_once_its_close_ending_what_runs() throws Exception {
    CountDownLatch inCall = new CountDownLatch(1);
    CountDownLatch cancelled = new CountDownLatch(1);
    BulkHandler statement =
        new BulkHandler() {
          @Override
          public Result handle(Batch batch) throws Exception {
            inCall.countDown();
            cancelled.await(30, TimeUnit.SECONDS); // a statement until its close cancels it
            return Result.retry("canceled");
          }

          @Override
          public void close() {
            cancelled.countDown();
          }
        };
    RunningBuffer b = buffer(statement); // an sql handler, as configured
    Thread call = callingOnItsOwnThread(b, new java.util.concurrent.CopyOnWriteArrayList<>());
    assertThat(inCall.await(10, TimeUnit.SECONDS)).isTrue();

    long started = System.nanoTime();
    BufferBatchHandler.closeHandlers(List.of(b), Duration.ofSeconds(30));

    assertThat(Duration.ofNanos(System.nanoTime() - started))
        .as("not waiting for the call its close ends")
        .isLessThan(Duration.ofSeconds(10));
    call.join(10_000);
    assertThat(call.isAlive()).isFalse();
  }

  @Test
  void should_close_every_handler_though_one_close_ends_with_an_error() {
    List<String> closed = new ArrayList<>();
    RunningBuffer failing =
        buffer(
            closing(
                () -> {
                  closed.add("a");
                  throw new NoClassDefFoundError("com/example/Gone");
                }));
    RunningBuffer next = buffer(closing(() -> closed.add("b")));

    assertThatThrownBy(
            () -> BufferBatchHandler.closeHandlers(List.of(failing, next), Duration.ofSeconds(1)))
        .isInstanceOf(NoClassDefFoundError.class);
    assertThat(closed).containsExactly("a", "b");
  }

  @Test
  void should_sleep_through_a_rate_wait_asking_the_checkpoint_now_and_then() throws Exception {
    RunningBuffer b =
        buffer(
            BufferSettings.of("events", TABLE, "main", new HandlerSpec.Sql(":ids"))
                .withConcurrency(1, 2.0),
            batch -> BulkHandler.Result.success());
    AtomicInteger asked = new AtomicInteger();

    b.call(BATCH, asked::incrementAndGet);
    b.call(BATCH, asked::incrementAndGet); // its permit is due half a second after the first

    // The first call asks once; the second waits its turn in slices of 100 ms, asking before
    // each (about six times), neither not at all (no wait) nor again and again (a spin).
    assertThat(asked.get()).isBetween(4, 20);
  }

  @Test
  void should_call_no_batch_before_the_time_a_retry_named() throws Exception {
    List<BulkHandler.Result> answers =
        new ArrayList<>(
            List.of(
                BulkHandler.Result.retry("no time named"),
                new BulkHandler.Result.Retry("429: come back in a second", Duration.ofSeconds(1)),
                BulkHandler.Result.success()));
    RunningBuffer b = buffer(batch -> answers.remove(0));
    BulkHandler.Batch other =
        new BulkHandler.Batch("events", "g-2", 1, "id", List.of(Map.of("id", 2)));
    AtomicInteger asked = new AtomicInteger();

    b.call(BATCH, asked::incrementAndGet);
    b.call(other, asked::incrementAndGet);
    assertThat(asked.get()).as("the backoff is the batch's own: the other called at once").isZero();

    assertThat(b.call(BATCH, asked::incrementAndGet))
        .as("not the batch told to come back")
        .isInstanceOf(BulkHandler.Result.Success.class);
    // It waited out the second in slices of 100 ms, asking before each (about ten times).
    assertThat(asked.get()).isBetween(5, 30);
  }

  @Test
  void should_hold_back_no_call_for_a_retry_naming_no_wait() throws Exception {
    List<BulkHandler.Result> answers =
        new ArrayList<>(
            List.of(
                new BulkHandler.Result.Retry("503, Retry-After: 0", Duration.ZERO),
                new BulkHandler.Result.Retry("a date already passed", Duration.ofSeconds(-3)),
                BulkHandler.Result.success()));
    RunningBuffer b = buffer(batch -> answers.remove(0));
    BulkHandler.Batch other =
        new BulkHandler.Batch("events", "g-2", 1, "id", List.of(Map.of("id", 2)));
    AtomicInteger asked = new AtomicInteger();

    b.call(BATCH, asked::incrementAndGet);
    b.call(other, asked::incrementAndGet);
    b.call(BATCH, asked::incrementAndGet);

    assertThat(asked.get())
        .as("no quiet time: the batch's own backoff is its next run's, not the buffer's")
        .isZero();
    assertThat(answers).isEmpty();
  }

  /**
   * One call at a rate of one per 2 s is answered 429 (come back in 3 s) while the next has its
   * permit and waits for its rate slot, due sooner than the receiver said: that one waits longer.
   */
  @Test
  void should_hold_a_call_already_waiting_for_its_rate_slot_until_the_time_a_retry_named()
      throws Exception {
    CountDownLatch secondWaits = new CountDownLatch(1);
    AtomicLong quietEnd = new AtomicLong();
    AtomicLong secondCalled = new AtomicLong();
    AtomicInteger calls = new AtomicInteger();
    RunningBuffer b =
        buffer(
            BufferSettings.of("events", TABLE, "main", new HandlerSpec.Sql(":ids"))
                .withConcurrency(2, 0.5),
            batch -> {
              if (calls.incrementAndGet() == 1) {
                secondWaits.await(10, TimeUnit.SECONDS);
                quietEnd.set(System.nanoTime() + Duration.ofSeconds(3).toNanos());
                return new BulkHandler.Result.Retry("429", Duration.ofSeconds(3));
              }
              secondCalled.set(System.nanoTime());
              return BulkHandler.Result.success();
            });
    ExecutorService pool = Executors.newFixedThreadPool(2);
    try {
      Future<BulkHandler.Result> first = pool.submit(() -> b.call(BATCH, () -> {}));
      await().atMost(Duration.ofSeconds(10)).until(() -> calls.get() == 1);
      BulkHandler.Batch other =
          new BulkHandler.Batch("events", "g-2", 1, "id", List.of(Map.of("id", 2)));
      Future<BulkHandler.Result> second = pool.submit(() -> b.call(other, secondWaits::countDown));

      assertThat(first.get(10, TimeUnit.SECONDS)).isInstanceOf(BulkHandler.Result.Retry.class);
      assertThat(second.get(10, TimeUnit.SECONDS)).isInstanceOf(BulkHandler.Result.Success.class);
      assertThat(secondCalled.get() - quietEnd.get())
          .as("called no sooner than the receiver said")
          .isNotNegative();
    } finally {
      secondWaits.countDown();
      pool.shutdownNow();
    }
  }

  @Test
  void should_count_an_interruption_the_handler_throws_of_its_own_as_a_retry() throws Exception {
    RunningBuffer b =
        buffer(
            batch -> {
              throw new InterruptedException("its own executor was shut down");
            });

    BulkHandler.Result r = b.call(BATCH, () -> {});

    assertThat(r).isInstanceOf(BulkHandler.Result.Retry.class);
    assertThat(((BulkHandler.Result.Retry) r).reason())
        .isEqualTo("handler failed: InterruptedException: its own executor was shut down");
    // A stopping worker's interrupt ends the run where it is.
    RunningBuffer.RunEnded stop = new RunningBuffer.RunEnded(new Outcome.Paused("worker stopping"));
    assertThatThrownBy(
            () ->
                b.call(
                    BATCH,
                    () -> {
                      throw stop; // asked only once the handler threw: the permit was free
                    }))
        .isSameAs(stop);
  }

  @ParameterizedTest
  @ValueSource(strings = {"exception", "missing class", "assertion", "recursion"})
  void should_count_what_a_handler_throws_as_a_retry_with_its_reason(String kind) throws Exception {
    Supplier<Throwable> thrown =
        switch (kind) {
          case "exception" -> () -> new IllegalStateException("receiver said no");
          case "missing class" -> () -> new NoClassDefFoundError("com/example/Missing");
          case "assertion" -> () -> new AssertionError("unexpected row");
          default -> () -> new StackOverflowError("deep");
        };
    String name = thrown.get().getClass().getSimpleName();

    // The permit is free, so the checkpoint would be asked only were this taken for an interrupt.
    BulkHandler.Result r =
        buffer(throwing(thrown))
            .call(
                BATCH,
                () -> {
                  throw new RunningBuffer.RunEnded(new Outcome.Paused("asked"));
                });

    assertThat(r).isInstanceOf(BulkHandler.Result.Retry.class);
    assertThat(((BulkHandler.Result.Retry) r).reason())
        .isEqualTo("handler failed: " + name + ": " + thrown.get().getMessage());
  }

  @Test
  void should_remember_the_retries_of_a_bounded_number_of_batches_until_they_settle() {
    RunningBuffer b = buffer(batch -> BulkHandler.Result.success());
    for (int i = 0; i <= RunningBuffer.RETRYING_KEPT; i++) {
      b.retrying("g-" + i, new RunningBuffer.Retrying(1, 0));
    }
    long kept =
        IntStream.rangeClosed(0, RunningBuffer.RETRYING_KEPT)
            .filter(i -> b.retrying("g-" + i).isPresent())
            .count();
    assertThat(kept).isEqualTo(RunningBuffer.RETRYING_KEPT);
    String last = "g-" + RunningBuffer.RETRYING_KEPT;
    assertThat(b.retrying(last)).contains(new RunningBuffer.Retrying(1, 0));

    b.retrying(last, new RunningBuffer.Retrying(2, 5));
    assertThat(b.retrying(last)).contains(new RunningBuffer.Retrying(2, 5));
    b.settled(last);
    assertThat(b.retrying(last)).isEmpty();
  }

  @Test
  void should_forget_a_batch_whose_calls_go_on_before_one_dead_lettered() {
    RunningBuffer b = buffer(batch -> BulkHandler.Result.success());
    RunningBuffer.Retrying deadLettered = RunningBuffer.Retrying.afterDeadLetter(List.of(7L));
    for (int i = 0; i < 100; i++) {
      b.retrying("dead-" + i, deadLettered);
    }
    RunningBuffer.Retrying givenUp = RunningBuffer.Retrying.givenUp(2, true, "bad contact");
    for (int i = 0; i < 50; i++) {
      b.retrying("given-up-" + i, givenUp);
    }
    for (int i = 0; i < 2 * RunningBuffer.RETRYING_KEPT; i++) {
      b.retrying("g-" + i, new RunningBuffer.Retrying(1, 0));
    }
    assertThat(IntStream.range(0, 100).filter(i -> b.retrying("dead-" + i).isPresent()))
        .as("dead letters whose rows are still to be deleted")
        .hasSize(100);
    assertThat(IntStream.range(0, 50).filter(i -> b.retrying("given-up-" + i).isPresent()))
        .as("batches given up whose dead letters are still to be written")
        .hasSize(50);
    long kept =
        IntStream.range(0, 2 * RunningBuffer.RETRYING_KEPT)
            .filter(i -> b.retrying("g-" + i).isPresent())
            .count();
    assertThat(kept).isEqualTo(RunningBuffer.RETRYING_KEPT - 150);

    for (int i = 100; i < RunningBuffer.RETRYING_KEPT + 100; i++) {
      b.retrying("dead-" + i, deadLettered); // nothing else left to forget
    }
    assertThat(
            IntStream.range(0, RunningBuffer.RETRYING_KEPT + 100)
                    .filter(i -> b.retrying("dead-" + i).isPresent())
                    .count()
                + IntStream.range(0, 50)
                    .filter(i -> b.retrying("given-up-" + i).isPresent())
                    .count())
        .isEqualTo(RunningBuffer.RETRYING_KEPT);
  }

  @Test
  void should_forget_a_batch_with_no_taken_rows_before_one_whose_taken_rows_are_still_there() {
    RunningBuffer b = buffer(batch -> BulkHandler.Result.success());
    RunningBuffer.Retrying taken = new RunningBuffer.Retrying(1, 0, Set.of(7L), "timed out");
    for (int i = 0; i < RunningBuffer.RETRYING_KEPT - 1; i++) {
      b.retrying("taken-" + i, taken);
    }
    b.retrying("plain", new RunningBuffer.Retrying(1, 0));

    b.retrying("new", new RunningBuffer.Retrying(1, 0));

    assertThat(b.retrying("plain")).as("the batch with no rows to delete").isEmpty();
    assertThat(
            IntStream.range(0, RunningBuffer.RETRYING_KEPT - 1)
                .filter(i -> b.retrying("taken-" + i).isPresent())
                .count())
        .as("batches whose taken rows would be handed over again if forgotten")
        .isEqualTo(RunningBuffer.RETRYING_KEPT - 1);
    assertThat(b.retrying("new")).isPresent();
  }

  @Test
  void should_remember_a_replay_apart_from_the_batch_it_replays() {
    SinkRecord batch =
        new SinkRecord("t.batches", 0, 7, "g-1".getBytes(), new byte[0], 0, Map.of());
    SinkRecord replay =
        new SinkRecord(
            "t.batches",
            0,
            9,
            "g-1".getBytes(),
            new byte[0],
            0,
            Map.of(SinkHeaders.REPLAYED_FROM, SinkHeaders.text("t.dlq-0@3")));

    assertThat(BufferBatchHandler.retryKey(batch)).isEqualTo("g-1");
    assertThat(BufferBatchHandler.retryKey(replay)).isNotEqualTo("g-1").startsWith("g-1");
    assertThat(
            BufferBatchHandler.retryKey(
                new SinkRecord("t.batches", 0, 7, null, new byte[0], 0, Map.of())))
        .as("keyless records apart")
        .isNotEqualTo(
            BufferBatchHandler.retryKey(
                new SinkRecord("t.batches", 0, 8, null, new byte[0], 0, Map.of())));
  }
}
