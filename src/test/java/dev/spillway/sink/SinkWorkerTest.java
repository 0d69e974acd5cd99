package dev.spillway.sink;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import dev.spillway.event.Pipeline;
import dev.spillway.event.TableName;
import dev.spillway.health.Health;
import dev.spillway.health.HealthGate;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.MockConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.MockProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;

/**
 * The worker loop's bookkeeping across a rebalance, driven turn by turn on Kafka's mock consumer.
 */
class SinkWorkerTest {
  private static final String TOPIC = "spillway.test.batches";
  private static final TopicPartition TP = new TopicPartition(TOPIC, 0);
  private static final Duration WAIT = Duration.ofSeconds(10);

  /** Set while Kafka cannot be reached: commits time out. */
  private final AtomicBoolean kafkaDown = new AtomicBoolean();

  /** Set while the consumer group rebalances: Kafka refuses commits. */
  private final AtomicBoolean rebalancing = new AtomicBoolean();

  /** Every commit the worker made, taken or not. */
  private final List<Map<TopicPartition, OffsetAndMetadata>> commitsTried =
      Collections.synchronizedList(new ArrayList<>());

  /** Set for a stop's wakeup to end the next position look-up, as it can a real consumer's. */
  private final AtomicBoolean wakeupAtPosition = new AtomicBoolean();

  /** Set for the worker to be told to stop as it next asks for end offsets, which that wakes. */
  private final AtomicBoolean stopAtEnds = new AtomicBoolean();

  /**
   * Set for rebalances to take partitions away as lost (the member's session ended), not revoked.
   */
  private final AtomicBoolean losing = new AtomicBoolean();

  /**
   * Set for closing the consumer to revoke its partitions first, as a real one leaving its group
   * does; {@link #answersAtClose} set for Kafka to answer again by then.
   */
  private final AtomicBoolean revokeOnClose = new AtomicBoolean();

  private final AtomicBoolean answersAtClose = new AtomicBoolean();
  private final AtomicReference<ConsumerRebalanceListener> subscribed = new AtomicReference<>();

  private final MockConsumer<byte[], byte[]> consumer =
      new MockConsumer<>("earliest") {
        @Override
        public synchronized void close(Duration timeout) {
          if (revokeOnClose.get() && subscribed.get() != null) {
            if (answersAtClose.get()) {
              kafkaDown.set(false);
            }
            subscribed.get().onPartitionsRevoked(assignment());
          }
          super.close(timeout);
        }

        @Override
        public synchronized void subscribe(
            Collection<String> topics, ConsumerRebalanceListener listener) {
          subscribed.set(listener);
          super.subscribe(
              topics,
              new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                  if (losing.get()) {
                    listener.onPartitionsLost(partitions);
                  } else {
                    listener.onPartitionsRevoked(partitions);
                  }
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                  listener.onPartitionsAssigned(partitions);
                }
              });
        }

        @Override
        public synchronized long position(TopicPartition partition, Duration timeout) {
          if (wakeupAtPosition.getAndSet(false)) {
            throw new org.apache.kafka.common.errors.WakeupException();
          }
          return super.position(partition, timeout);
        }

        @Override
        public synchronized Map<TopicPartition, Long> endOffsets(
            java.util.Collection<TopicPartition> partitions, Duration timeout) {
          if (stopAtEnds.getAndSet(false)) {
            worker.stop(Duration.ZERO);
            super.poll(
                Duration.ZERO); // throws the stop's wakeup, spent as a real look-up spends it
            throw new AssertionError("the stop's wakeup was not pending");
          }
          return super.endOffsets(partitions, timeout);
        }

        @Override
        public synchronized void commitSync(
            Map<TopicPartition, OffsetAndMetadata> offsets, Duration timeout) {
          commitsTried.add(Map.copyOf(offsets));
          failWhileKafkaIsDown();
          super.commitSync(offsets, timeout);
        }

        private void failWhileKafkaIsDown() {
          if (kafkaDown.get()) {
            throw new TimeoutException("Timeout expired before successfully committing offsets");
          }
          if (rebalancing.get()) {
            throw new RebalanceInProgressException("the consumer is undergoing a rebalance");
          }
        }
      };
  private final CountDownLatch release = new CountDownLatch(1);
  private final AtomicBoolean firstRun = new AtomicBoolean(true);
  private final List<Long> runs = Collections.synchronizedList(new ArrayList<>());
  private SinkWorker worker;
  private Duration stepAsideAfter = SinkSettings.DEFAULT_STEP_ASIDE_AFTER;

  /** Set for the STOP of the step-aside tests' gates to end. */
  private final AtomicBoolean stopLifted = new AtomicBoolean();

  /** Handles every batch at once, but for the very first, which waits for {@link #release}. */
  private final BatchHandler handler =
      new BatchHandler() {
        @Override
        public Optional<Target> target(SinkRecord record) {
          return Optional.of(new Target("main", TableName.parse("t")));
        }

        @Override
        public Outcome execute(SinkRecord record, RunContext context) throws Exception {
          if (firstRun.getAndSet(false)) {
            release.await(); // a batch that reaches no checkpoint while its partition moves
          }
          runs.add(record.offset());
          return new Outcome.Done(1);
        }
      };

  /** Appenders a test attached to the worker's log, detached once it ends. */
  private final List<ListAppender<ILoggingEvent>> logs = new ArrayList<>();

  @AfterEach
  void release() {
    release.countDown();
    if (worker != null) {
      worker.close(Duration.ZERO);
    }
    logs.forEach(((Logger) LoggerFactory.getLogger(SinkWorker.class))::detachAppender);
  }

  /** What the worker logs from here until the test ends. */
  private ListAppender<ILoggingEvent> workerLog() {
    ListAppender<ILoggingEvent> logged = new ListAppender<>();
    logged.start();
    ((Logger) LoggerFactory.getLogger(SinkWorker.class)).addAppender(logged);
    logs.add(logged);
    return logged;
  }

  @Test
  void should_ignore_a_batch_that_ends_after_its_partition_was_revoked_and_assigned_back()
      throws Exception {
    worker = holdingTheOnePartition(worker(Duration.ofMillis(100)));
    startHangingBatch();

    consumer.rebalance(List.of()); // revoked: batch 0 outlives the grace and is counted out
    assignedBackEveryBatchRuns("the stale result skipped none");
  }

  /** Claims batches 0..2 and starts batch 0, which hangs until {@link #release}. */
  private void startHangingBatch() {
    addBatches(0, 3);
    worker.runOnce();
    await().atMost(WAIT).until(() -> !firstRun.get());
  }

  /**
   * The partition assigned back after it moved while batch 0 hung: nothing was committed, so 0..2
   * come again and run, and the hung run's late result skips none of them.
   */
  private void assignedBackEveryBatchRuns(String why) {
    consumer.rebalance(List.of(TP));
    addBatches(0, 3);
    worker.runOnce(); // starts batch 0 again, which ends at once
    await().atMost(WAIT).until(() -> worker.completionsWaiting() == 1);
    release.countDown(); // the first run of batch 0 ends too, long after its partition moved
    await().atMost(WAIT).until(() -> worker.completionsWaiting() == 2);

    turnUntilCommitted(3);
    assertThat(runs)
        .as("every batch after the reassignment ran; " + why)
        .containsExactlyInAnyOrder(0L, 0L, 1L, 2L);
  }

  @Test
  void should_run_max_in_flight_batches_while_a_run_left_after_its_partition_moved_still_hangs()
      throws Exception {
    CountDownLatch together = new CountDownLatch(2);
    BatchHandler meeting =
        onTableT(
            (record, context) -> {
              if (firstRun.getAndSet(false)) {
                release.await(); // a run that reaches no checkpoint while its partition moves
              } else {
                together.countDown(); // each of the next two runs waits until both run
                together.await(WAIT.toMillis(), TimeUnit.MILLISECONDS);
              }
              runs.add(record.offset());
              return new Outcome.Done(1);
            });
    worker = holdingTheOnePartition(worker(Duration.ofMillis(100), meeting));
    startHangingBatch();
    consumer.rebalance(List.of()); // revoked: batch 0 outlives the grace and is let go

    TopicPartition other = new TopicPartition(TOPIC, 1);
    consumer.rebalance(List.of(TP, other));
    consumer.updateBeginningOffsets(Map.of(TP, 0L, other, 0L));
    addBatches(0, 1);
    consumer.addRecord(new ConsumerRecord<>(TOPIC, 1, 0, new byte[0], new byte[0]));
    worker.runOnce();

    // Two in flight, as max-in-flight allows, though the run let go holds its thread still.
    assertThat(together.await(WAIT.toMillis(), TimeUnit.MILLISECONDS)).isTrue();
  }

  @Test
  void should_neither_wait_for_nor_commit_a_batch_whose_partition_was_lost_and_run_it_again()
      throws Exception {
    // A grace no test outlives: a revoke would wait for the hanging batch, a loss must not.
    worker = holdingTheOnePartition(worker(Duration.ofHours(1)));
    startHangingBatch();

    losing.set(true);
    assertTimeoutPreemptively(
        WAIT, () -> consumer.rebalance(List.of()), "a lost partition's batch is not waited for");
    assertThat(commitsTried)
        .as("nothing committed for a partition no longer this member's")
        .isEmpty();
    losing.set(false);

    assignedBackEveryBatchRuns("the lost run's result skipped none");
  }

  @Test
  void should_commit_past_the_transaction_marker_after_the_batches_it_settled() {
    release.countDown();
    worker = holdingTheOnePartition(worker(Duration.ofMillis(100)));
    addBatches(0, 2);
    turnUntilCommitted(2);

    // A fetch passes the marker at offset 2 that ended the Streams transaction holding both.
    consumer.seek(TP, 3);
    worker.runOnce();

    assertThat(committed()).as("the marker is not left as a batch waiting").isEqualTo(3);
    addBatches(3, 4);
    turnUntilCommitted(4);
    assertThat(runs).containsExactly(0L, 1L, 3L);
  }

  @Test
  void should_stop_saying_why_when_a_batch_ends_with_an_error_instead_of_holding_its_partition()
      throws Exception {
    BatchHandler failing =
        onTableT(
            (record, context) -> {
              throw new AssertionError("a defect in the handler");
            });
    worker = holdingTheOnePartition(worker(Duration.ofMillis(100), failing));
    addBatches(0, 2);
    worker.runOnce();

    await().atMost(WAIT).until(() -> worker.failure() != null);
    assertThat(worker.failure())
        .hasMessage(
            "batch " + TOPIC + "-0@0 ended with java.lang.AssertionError: a defect in the handler");
    await().atMost(WAIT).until(() -> worker.completionsWaiting() == 1);
    worker.runOnce();
    assertThat(committed()).as("the batch is not committed: it runs again").isEqualTo(-1);
  }

  @Test
  void should_stop_saying_why_when_an_error_ends_its_loop() {
    BatchHandler missingClass =
        new BatchHandler() {
          @Override
          public Optional<Target> target(SinkRecord record) {
            throw new NoClassDefFoundError("com/example/Gone");
          }

          @Override
          public Outcome execute(SinkRecord record, RunContext context) {
            return new Outcome.Done(1);
          }
        };
    worker = worker(Duration.ofMillis(100), missingClass);
    consumer.schedulePollTask(
        () -> {
          consumer.rebalance(List.of(TP));
          consumer.updateBeginningOffsets(Map.of(TP, 0L));
          addBatches(0, 1);
        });
    worker.start(); // its own thread, as in a running sink

    await().atMost(WAIT).until(() -> worker.failure() != null);
    assertThat(worker.failure())
        .isInstanceOf(NoClassDefFoundError.class)
        .hasMessage("com/example/Gone");
  }

  @Test
  void should_not_warn_of_batches_left_uncommitted_that_the_consumer_commits_as_it_leaves() {
    assertThat(warningsOfAStopOwingCommits(true)).noneMatch(m -> m.contains("not committed"));
  }

  @Test
  void should_warn_of_batches_left_uncommitted_once_the_consumer_left_without_committing_them() {
    assertThat(warningsOfAStopOwingCommits(false))
        .contains(
            "Sink worker test-sink stopped with the batches it finished on 1 partitions not committed:"
                + " they run again at the next start");
  }

  /**
   * Runs two batches on a worker of its own thread while Kafka takes no commit, stops it with no
   * grace, and returns the warnings it logged: Kafka answers again as the consumer leaves when
   * {@code answers}.
   */
  private List<String> warningsOfAStopOwingCommits(boolean answers) {
    ListAppender<ILoggingEvent> logged = workerLog();
    release.countDown();
    kafkaDown.set(true);
    revokeOnClose.set(true);
    answersAtClose.set(answers);
    worker = worker(Duration.ofMillis(100));
    consumer.schedulePollTask(
        () -> {
          consumer.rebalance(List.of(TP));
          consumer.updateBeginningOffsets(Map.of(TP, 0L));
          addBatches(0, 2);
        });
    worker.start();
    // Both run, and a commit of what they finished failed: it is owed.
    await().atMost(WAIT).until(() -> runs.size() == 2 && !commitsTried.isEmpty());
    worker.close(Duration.ZERO);
    return logged.list.stream()
        .filter(e -> e.getLevel() == Level.WARN)
        .map(ILoggingEvent::getFormattedMessage)
        .toList();
  }

  @Test
  void should_not_warn_of_a_commit_a_routine_rebalance_holds_back() {
    ListAppender<ILoggingEvent> logged = workerLog();
    release.countDown();
    worker = worker(Duration.ofMillis(100));
    worker.subscribe();
    consumer.rebalance(List.of(TP));
    consumer.updateBeginningOffsets(Map.of(TP, 0L));
    rebalancing.set(true); // another instance joins the group
    addBatches(0, 2);
    turnUntilRun(2);
    assertThat(committed()).isEqualTo(-1);

    assertThat(logged.list).extracting(ILoggingEvent::getLevel).doesNotContain(Level.WARN);
    assertThat(logged.list)
        .extracting(ILoggingEvent::getFormattedMessage)
        .anyMatch(m -> m.contains("once its consumer group has rebalanced"));

    // Then Kafka stops answering: that is warned of, though a rebalance came first.
    rebalancing.set(false);
    kafkaDown.set(true);
    int tried = commitsTried.size();
    await()
        .atMost(WAIT)
        .until(
            () -> {
              worker.runOnce();
              return commitsTried.size() > tried;
            });
    assertThat(logged.list).extracting(ILoggingEvent::getLevel).contains(Level.WARN);

    kafkaDown.set(false);
    turnUntilCommitted(2);
  }

  @Test
  void should_go_on_while_kafka_takes_no_commit_and_commit_what_it_finished_once_it_does() {
    startWhileKafkaIsDown();
    addBatches(0, 2);
    turnUntilRun(2);
    addBatches(2, 3);
    turnUntilRun(3);
    assertThat(committed()).as("nothing taken while Kafka is away").isEqualTo(-1);
    assertThat(commitsTried)
        .as("tried once, then not at every turn: each try may wait seconds for Kafka")
        .hasSize(1);

    kafkaDown.set(false);
    turnUntilCommitted(3);
    assertThat(runs).as("each batch ran once").containsExactly(0L, 1L, 2L);
  }

  @Test
  void should_commit_what_it_owes_before_its_partitions_go() {
    startWhileKafkaIsDown();
    addBatches(0, 2);
    turnUntilRun(2);
    assertThat(committed()).isEqualTo(-1);

    kafkaDown.set(false);
    commitsTried.clear();
    consumer.rebalance(List.of()); // a rebalance, before the worker's next try

    // Kafka's mock unassigns the partitions before it calls the listener and then drops the
    // commit; the real consumer takes it while they are being revoked. What was asked counts.
    assertThat(commitsTried)
        .as("not left for the next owner to run again")
        .containsExactly(Map.of(TP, new OffsetAndMetadata(2)));
  }

  @Test
  void should_not_run_again_a_batch_paused_at_a_later_table_while_that_table_is_at_stop()
      throws Exception {
    release.countDown();
    Target first = new Target("main", TableName.parse("projects_children"));
    Target second = new Target("ci", TableName.parse("ci_pipelines"));
    AtomicReference<Health> secondHealth =
        new AtomicReference<>(new Health.Stop("database ci unreachable: Connection refused"));
    HealthGate gate =
        (database, table) -> database.equals("ci") ? secondHealth.get() : Health.NORMAL;
    AtomicInteger started = new AtomicInteger();
    // A batch over two tables, as a loose foreign key's with children in two databases.
    BatchHandler twoTables =
        new BatchHandler() {
          @Override
          public Optional<Target> target(SinkRecord record) {
            return Optional.of(first);
          }

          @Override
          public Outcome execute(SinkRecord record, RunContext context) throws Exception {
            started.incrementAndGet();
            Optional<Outcome> end = context.checkpoint();
            if (end.isEmpty()) {
              end = context.forTarget(second).checkpoint();
            }
            if (end.isPresent()) {
              return end.get();
            }
            runs.add(record.offset());
            return new Outcome.Done(1);
          }
        };
    worker = holdingTheOnePartition(worker(Duration.ofMillis(100), twoTables, gate));
    addBatches(0, 1);
    worker.runOnce();
    await().atMost(WAIT).until(() -> worker.completionsWaiting() == 1);
    turnWhile(
        Duration.ofMillis(200),
        "not run again while its second table is at STOP",
        () -> started.get() == 1);
    assertThat(committed()).isEqualTo(-1);

    secondHealth.set(Health.NORMAL);
    turnUntilCommitted(1);
    assertThat(started).hasValue(2);
    assertThat(runs).containsExactly(0L);
  }

  @Test
  void should_step_a_batch_held_at_stop_aside_once_its_table_has_been_at_stop_a_while() {
    MockProducer<byte[], byte[]> producer = steppingAside(Duration.ofMillis(200));
    addBatch(0, "stopped");
    addBatch(1, "other");
    addBatch(2, "other");

    turnUntilCommitted(3);

    assertThat(runs).containsExactly(1L, 2L);
    assertThat(producer.history()).hasSize(1);
    ProducerRecord<byte[], byte[]> aside = producer.history().get(0);
    assertThat(aside.topic()).isEqualTo(TOPIC + ".delayed");
    assertThat(new String(aside.key(), StandardCharsets.UTF_8)).isEqualTo("stopped");
    assertThat(header(aside, SinkHeaders.STEPPED_ASIDE))
        .isEqualTo("public.stopped is at STOP: an operator's switch");
    assertThat(header(aside, SinkHeaders.BATCHES_TOPIC)).isEqualTo(TOPIC);
    assertThat(aside.headers().lastHeader(SinkHeaders.ATTEMPTS).value())
        .as("its attempts not spent")
        .isEqualTo(SinkHeaders.intValue(0));
  }

  @Test
  void should_keep_a_batch_held_at_stop_in_place_when_the_batches_behind_it_wait_for_stop_too() {
    MockProducer<byte[], byte[]> producer = steppingAside(Duration.ofMillis(10));
    addBatch(0, "stopped");
    addBatch(1, "stopped");

    turnWhile(
        Duration.ofMillis(500),
        "nothing stepped aside: a buffer's batches all wait for its one table",
        () -> producer.history().isEmpty() && runs.isEmpty());
    assertThat(committed()).isEqualTo(-1);

    stopLifted.set(true);
    turnUntilCommitted(2);
    assertThat(runs).as("kept in place, then run in order").containsExactly(0L, 1L);
  }

  @Test
  void should_step_batches_held_at_stop_aside_when_records_not_fetched_wait_behind_them() {
    MockProducer<byte[], byte[]> producer = steppingAside(Duration.ofMillis(10));
    addBatch(0, "stopped");
    addBatch(1, "stopped");
    consumer.updateEndOffsets(Map.of(TP, 5L)); // three more, not fetched while it is paused

    turnUntilCommitted(2);

    assertThat(producer.history()).hasSize(2);
    assertThat(runs).isEmpty();
  }

  @Test
  void should_keep_a_lone_batch_in_place_while_its_whole_database_is_at_stop() {
    release.countDown();
    stepAsideAfter = Duration.ofMillis(10);
    MockProducer<byte[], byte[]> producer =
        new MockProducer<>(true, null, new ByteArraySerializer(), new ByteArraySerializer());
    HealthGate databaseDown =
        (db, table) ->
            stopLifted.get() ? Health.NORMAL : new Health.Stop("database main unreachable");
    worker =
        holdingTheOnePartition(
            worker(Duration.ofMillis(100), TestWorkers.byKey(runs), databaseDown, producer));
    addBatch(0, "stopped");
    consumer.updateEndOffsets(Map.of(TP, 5L));

    // Past the second it fetches what lies behind.
    turnWhile(
        Duration.ofMillis(1_500),
        "nothing behind it could run in a database at STOP",
        () -> producer.history().isEmpty());

    stopLifted.set(true);
    turnUntilCommitted(1);
    assertThat(runs).as("kept in place, then run").containsExactly(0L);
  }

  @Test
  void should_keep_a_lone_batch_held_at_stop_in_place_until_one_that_could_run_comes_behind_it() {
    MockProducer<byte[], byte[]> producer = steppingAside(Duration.ofMillis(10));
    addBatch(0, "stopped");

    turnWhile(
        Duration.ofMillis(1_500),
        "nothing behind it in its partition waits for it",
        () -> producer.history().isEmpty() && runs.isEmpty());

    addBatch(1, "other"); // written to its paused partition: fetched to be seen
    turnUntilCommitted(2);

    assertThat(producer.history())
        .singleElement()
        .satisfies(
            r -> assertThat(new String(r.key(), StandardCharsets.UTF_8)).isEqualTo("stopped"));
    assertThat(runs).containsExactly(1L);
  }

  @Test
  void should_step_a_held_batch_aside_once_it_holds_as_many_as_it_fetches_behind_it() {
    MockProducer<byte[], byte[]> producer = steppingAside(Duration.ofMillis(10));
    consumer.setMaxPollRecords(2);
    for (long offset = 0; offset < 100; offset++) {
      addBatch(offset, "stopped");
    }
    addBatch(100, "other");

    await()
        .atMost(WAIT)
        .pollInterval(Duration.ofMillis(1))
        .until(
            () -> {
              worker.runOnce();
              return !producer.history().isEmpty();
            });

    assertThat(consumer.position(TP))
        .as("fetched behind its head as much as it may hold, not all there is")
        .isGreaterThanOrEqualTo(SinkWorker.FETCH_BEHIND_AT_MOST)
        .isLessThan(SinkWorker.FETCH_BEHIND_AT_MOST + 10);
    await()
        .atMost(WAIT)
        .pollInterval(Duration.ofMillis(1))
        .until(
            () -> {
              worker.runOnce();
              return runs.size() == 1;
            });
    assertThat(runs).containsExactly(100L);
    assertThat(producer.history()).hasSize(100);
  }

  /**
   * A held head starts fetching what lies behind it (a batch Kafka holds, not yet fetchable: as a
   * commit marker shows), then the batches of two other partitions fill the worker for over a
   * second: the partition goes on fetching meanwhile, so its look does not run out with nothing
   * fetched, which would step the head aside for what only waits for STOP too.
   */
  @Test
  void should_go_on_fetching_behind_a_held_batch_while_the_worker_is_full() {
    TopicPartition tp1 = new TopicPartition(TOPIC, 1);
    TopicPartition tp2 = new TopicPartition(TOPIC, 2);
    CountDownLatch slow = new CountDownLatch(1);
    release.countDown();
    stepAsideAfter = Duration.ofMillis(200);
    BatchHandler byKey = TestWorkers.byKey(runs);
    BatchHandler handler =
        new BatchHandler() {
          @Override
          public Optional<Target> target(SinkRecord record) {
            return byKey.target(record);
          }

          @Override
          public Outcome execute(SinkRecord record, RunContext context) throws Exception {
            if (new String(record.key(), StandardCharsets.UTF_8).equals("slow")) {
              slow.await();
            }
            return byKey.execute(record, context);
          }
        };
    MockProducer<byte[], byte[]> producer =
        new MockProducer<>(true, null, new ByteArraySerializer(), new ByteArraySerializer());
    worker =
        worker(
            Duration.ofMillis(100), handler, TestWorkers.stoppedTable(stopLifted::get), producer);
    worker.subscribe();
    consumer.rebalance(List.of(TP, tp1, tp2));
    consumer.updateBeginningOffsets(Map.of(TP, 0L, tp1, 0L, tp2, 0L));
    addBatch(0, "stopped");
    consumer.updateEndOffsets(Map.of(TP, 2L)); // one more held back from the fetch
    TestWorkers.turnUntil(
        worker,
        WAIT,
        "the stopped head held, its partition paused",
        () -> consumer.paused().contains(TP));
    long held = System.nanoTime();
    await()
        .atMost(WAIT)
        .until(() -> System.nanoTime() - held > stepAsideAfter.multipliedBy(2).toNanos());

    for (TopicPartition slowOne : List.of(tp1, tp2)) {
      consumer.addRecord(
          new ConsumerRecord<>(
              TOPIC, slowOne.partition(), 0, "slow".getBytes(StandardCharsets.UTF_8), new byte[0]));
      consumer.updateEndOffsets(Map.of(slowOne, 1L));
    }
    worker.runOnce(); // the head starts its look behind; the two slow batches fill the worker
    consumer.addRecord(
        new ConsumerRecord<>(TOPIC, 0, 1, "stopped".getBytes(StandardCharsets.UTF_8), new byte[0]));
    turnWhile(
        Duration.ofMillis(1_300),
        "nothing stepped aside while the worker is full",
        () -> producer.history().isEmpty());
    slow.countDown();

    turnWhile(
        Duration.ofMillis(1_500),
        "nothing stepped aside: the batch fetched behind it waits for STOP too",
        () -> producer.history().isEmpty());
    assertThat(runs).as("the two slow batches only").containsExactly(0L, 0L);
  }

  @Test
  void should_start_nothing_more_once_told_to_stop_while_it_asked_for_the_paused_ends() {
    MockProducer<byte[], byte[]> producer = steppingAside(Duration.ofMillis(10));
    addBatch(0, "stopped");
    addBatch(1, "stopped"); // nothing could run behind it: the worker asks where its partition ends
    stopAtEnds.set(true);

    TestWorkers.turnUntil(
        worker, WAIT, "the stop asked while the ends were looked at", () -> !stopAtEnds.get());

    await()
        .during(Duration.ofMillis(300))
        .atMost(WAIT)
        .alias("no batch started, nor stepped aside, after the stop")
        .until(() -> producer.history().isEmpty() && worker.completionsWaiting() == 0);
    assertThat(runs).isEmpty();
  }

  /**
   * A worker holding the one partition, each batch for the table its key names, table {@code
   * stopped} at STOP, stepping aside {@code after} it; the producer it sends with.
   */
  private MockProducer<byte[], byte[]> steppingAside(Duration after) {
    release.countDown();
    stepAsideAfter = after;
    MockProducer<byte[], byte[]> producer =
        new MockProducer<>(true, null, new ByteArraySerializer(), new ByteArraySerializer());
    worker =
        holdingTheOnePartition(
            worker(
                Duration.ofMillis(100),
                TestWorkers.byKey(runs),
                TestWorkers.stoppedTable(stopLifted::get),
                producer));
    return producer;
  }

  private static String header(ProducerRecord<byte[], byte[]> r, String key) {
    return new String(r.headers().lastHeader(key).value(), StandardCharsets.UTF_8);
  }

  /** A batch for {@code table}, the partition's last record. */
  private void addBatch(long offset, String table) {
    consumer.addRecord(
        new ConsumerRecord<>(
            TOPIC, 0, offset, table.getBytes(StandardCharsets.UTF_8), new byte[0]));
    consumer.updateEndOffsets(Map.of(TP, offset + 1));
  }

  @Test
  void should_run_a_batch_kafka_would_not_take_back_again_only_after_the_retry_backoff() {
    release.countDown();
    AtomicInteger started = new AtomicInteger();
    List<Long> startedAt = Collections.synchronizedList(new ArrayList<>());
    BatchHandler refused =
        onTableT(
            (record, context) -> {
              startedAt.add(System.nanoTime());
              started.incrementAndGet();
              return new Outcome.PermanentFailure(new IllegalArgumentException("bad batch"));
            });
    // The dead-letter topic is one Spillway may not write to.
    MockProducer<byte[], byte[]> producer =
        new MockProducer<>(true, null, new ByteArraySerializer(), new ByteArraySerializer());
    producer.sendException =
        new org.apache.kafka.common.errors.TopicAuthorizationException(Set.of(TOPIC + ".dlq"));
    worker =
        holdingTheOnePartition(
            worker(Duration.ofMillis(100), refused, HealthGate.ALWAYS_NORMAL, producer));
    addBatches(0, 1);

    // Half the 1 s backoff, then three quarters of the 2 s it doubles to.
    turnWithoutRunningAgain(started, 1, Duration.ofMillis(500), "not run again at once");
    turnUntilStarted(started, 2);
    turnWithoutRunningAgain(started, 2, Duration.ofMillis(1_500), "the backoff doubling");
    turnUntilStarted(started, 3);
    long first = startedAt.get(1) - startedAt.get(0);
    long second = startedAt.get(2) - startedAt.get(1);
    assertThat(Duration.ofNanos(second - first))
        .as("the second wait a second longer than the first (1 s, then 2 s)")
        .isGreaterThan(Duration.ofMillis(500));
    assertThat(committed()).isEqualTo(-1);
  }

  @Test
  void should_settle_and_commit_what_finished_when_the_stop_wakes_a_position_look_up() {
    release.countDown();
    worker = holdingTheOnePartition(worker(Duration.ofMillis(100)));
    addBatches(0, 1);
    worker.runOnce();
    await().atMost(WAIT).until(() -> worker.completionsWaiting() == 1);

    // The last batch in hand settled: its partition's position is looked up as the stop wakes it.
    wakeupAtPosition.set(true);
    worker.runOnce();

    assertThat(wakeupAtPosition).as("the look-up was woken").isFalse();
    assertThat(committed()).isEqualTo(1);
  }

  /** How a test's handler runs a batch. */
  @FunctionalInterface
  private interface Run {
    Outcome execute(SinkRecord record, RunContext context) throws Exception;
  }

  /** A handler whose every batch works on table t of database main, run as {@code run} says. */
  private static BatchHandler onTableT(Run run) {
    return new BatchHandler() {
      @Override
      public Optional<Target> target(SinkRecord record) {
        return Optional.of(new Target("main", TableName.parse("t")));
      }

      @Override
      public Outcome execute(SinkRecord record, RunContext context) throws Exception {
        return run.execute(record, context);
      }
    };
  }

  /** Turns the worker for {@code during}, the batch started {@code times} all along. */
  private void turnWithoutRunningAgain(
      AtomicInteger started, int times, Duration during, String why) {
    turnWhile(during, why, () -> started.get() == times);
  }

  /** Drives the worker turn by turn for {@code during}, {@code holds} true after every turn. */
  private void turnWhile(Duration during, String why, java.util.function.BooleanSupplier holds) {
    await()
        .during(during)
        .atMost(WAIT)
        .pollInterval(Duration.ofMillis(5))
        .alias(why)
        .until(
            () -> {
              worker.runOnce();
              return holds.getAsBoolean();
            });
  }

  /** Turns the worker until the batch has started {@code times}. */
  private void turnUntilStarted(AtomicInteger started, int times) {
    await()
        .atMost(WAIT)
        .until(
            () -> {
              worker.runOnce();
              return started.get() == times;
            });
  }

  /** The worker, subscribed and assigned the one partition, read from its start. */
  private SinkWorker holdingTheOnePartition(SinkWorker w) {
    w.subscribe();
    consumer.rebalance(List.of(TP));
    consumer.updateBeginningOffsets(Map.of(TP, 0L));
    return w;
  }

  /** A worker holding the one partition, Kafka taking no commit. */
  private void startWhileKafkaIsDown() {
    release.countDown();
    worker = holdingTheOnePartition(worker(Duration.ofMillis(100)));
    kafkaDown.set(true);
  }

  /** Drives the worker turn by turn until {@code count} batches ran and were settled. */
  private void turnUntilRun(int count) {
    await()
        .atMost(WAIT)
        .until(
            () -> {
              worker.runOnce();
              return runs.size() == count && worker.completionsWaiting() == 0;
            });
  }

  /** Drives the worker turn by turn until the partition's committed offset is {@code offset}. */
  private void turnUntilCommitted(long offset) {
    await()
        .atMost(WAIT)
        .until(
            () -> {
              worker.runOnce();
              return committed() == offset;
            });
  }

  private void addBatches(long from, long to) {
    for (long offset = from; offset < to; offset++) {
      consumer.addRecord(new ConsumerRecord<>(TOPIC, 0, offset, new byte[0], new byte[0]));
    }
  }

  private long committed() {
    OffsetAndMetadata o = consumer.committed(Set.of(TP)).get(TP);
    return o == null ? -1 : o.offset();
  }

  private SinkWorker worker(Duration grace) {
    return worker(grace, handler);
  }

  private SinkWorker worker(Duration grace, BatchHandler handler) {
    return worker(grace, handler, HealthGate.ALWAYS_NORMAL);
  }

  private SinkWorker worker(Duration grace, BatchHandler handler, HealthGate gate) {
    return worker(
        grace,
        handler,
        gate,
        new MockProducer<>(true, null, new ByteArraySerializer(), new ByteArraySerializer()));
  }

  private SinkWorker worker(
      Duration grace,
      BatchHandler handler,
      HealthGate gate,
      MockProducer<byte[], byte[]> producer) {
    SinkSettings settings =
        new SinkSettings(
            1,
            2,
            SinkSettings.DEFAULT_MAX_ATTEMPTS,
            SinkSettings.DEFAULT_CONSUME_AFTER,
            0,
            SinkSettings.DEFAULT_RETRY_BACKOFF,
            SinkSettings.DEFAULT_RETRY_BACKOFF_MAX,
            SinkSettings.DEFAULT_MAX_ROWS_PER_RUN,
            SinkSettings.DEFAULT_MAX_RUNTIME_PER_RUN,
            SinkSettings.DEFAULT_SUB_BATCH_PAUSE,
            SinkSettings.DEFAULT_THROTTLE_PAUSE,
            SinkSettings.DEFAULT_THROTTLE_FACTOR,
            SinkSettings.DEFAULT_SUB_BATCH_FLOOR,
            Duration.ofMillis(10),
            grace,
            stepAsideAfter);
    return TestWorkers.worker(
        consumer,
        producer,
        TOPIC,
        2,
        handler,
        gate,
        settings,
        new SinkMetrics(new SimpleMeterRegistry(), Pipeline.BUFFERS));
  }
}
