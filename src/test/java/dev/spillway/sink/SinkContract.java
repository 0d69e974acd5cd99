package dev.spillway.sink;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.spillway.event.Pipeline;
import dev.spillway.event.TableName;
import dev.spillway.event.Topics;
import dev.spillway.health.Health;
import dev.spillway.health.HealthGate;
import dev.spillway.health.HealthIndicator;
import dev.spillway.health.HealthMonitor;
import dev.spillway.health.HealthThresholds;
import dev.spillway.health.LatencyWindow;
import dev.spillway.health.StandardIndicators;
import dev.spillway.jdbc.DatabaseEndpoint;
import dev.spillway.jdbc.Databases;
import dev.spillway.testing.Infra;
import dev.spillway.testing.SettableClock;
import dev.spillway.testing.TcpProxy;
import dev.spillway.testing.TestSql;
import dev.spillway.testing.TopicReader;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import javax.sql.DataSource;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** Sink workers against a real PostgreSQL and a real broker; subclasses say which ones. */
abstract class SinkContract {
  private static final Duration TIMEOUT = Duration.ofSeconds(60);
  private static final String DB = "sink";
  private static final Pipeline PIPELINE = Pipeline.LFK;

  protected abstract Infra infra();

  private Databases databases;
  private DataSource ds;
  private String schema;
  private Topics topics;
  private String batches;
  private TableName table;
  private final LatencyWindow latency = new LatencyWindow(Clock.systemUTC(), Duration.ofMinutes(1));
  private final SimpleMeterRegistry registry = new SimpleMeterRegistry();

  @BeforeEach
  void setUp() {
    String id = UUID.randomUUID().toString().replace("-", "").substring(0, 10);
    schema = "s" + id;
    topics = new Topics("t" + id);
    batches = topics.batches(PIPELINE, "test-batches");
    databases = infra().databases(DB);
    ds = databases.dataSource(DB);
    table = new TableName(schema, "children");
    TestSql.exec(
        ds,
        "CREATE SCHEMA " + schema,
        "CREATE TABLE " + table.quoted() + " (id bigint PRIMARY KEY)",
        "INSERT INTO " + table.quoted() + " SELECT g FROM generate_series(1, 1000) g");
  }

  @AfterEach
  void tearDown() {
    TestSql.exec(ds, "DROP SCHEMA " + schema + " CASCADE");
    databases.close();
  }

  private Sink.Wiring wiring(HealthGate gate, Clock clock) {
    return wiring(gate, clock, ds);
  }

  private Sink.Wiring wiring(HealthGate gate, Clock clock, DataSource pool) {
    return new Sink.Wiring(
        infra().bootstrapServers(),
        Map.of(),
        topics,
        2,
        (short) 1,
        gate,
        db -> pool,
        db -> latency,
        registry,
        clock);
  }

  /** A sink deleting the ids of each batch, 5 rows a statement, health always NORMAL. */
  private Sink deleting(SinkSettings settings, Clock clock) throws InterruptedException {
    return Sink.start(
        PIPELINE,
        batches,
        new DeleteIdsHandler(DB, 5),
        settings,
        wiring(HealthGate.ALWAYS_NORMAL, clock));
  }

  private static SinkSettings settings() {
    return SinkSettings.defaults()
        .withRetries(2, Duration.ofMillis(20))
        .withThrottle(Duration.ofMillis(10), 0.25, 2);
  }

  private long remaining(long fromId, long toId) {
    return TestSql.count(
        ds,
        "SELECT count(*) FROM " + table.quoted() + " WHERE id BETWEEN " + fromId + " AND " + toId);
  }

  @Test
  void should_close_within_its_shutdown_grace_though_a_batch_never_reaches_a_checkpoint()
      throws Exception {
    CountDownLatch running = new CountDownLatch(1);
    BatchHandler stuck =
        new BatchHandler() {
          @Override
          public Optional<Target> target(SinkRecord record) {
            return Optional.of(new Target(DB, table));
          }

          @Override
          public Outcome execute(SinkRecord record, RunContext context)
              throws InterruptedException {
            running.countDown();
            new CountDownLatch(1).await(); // until the worker gives up on it
            return new Outcome.Done(0);
          }
        };
    Sink sink =
        Sink.start(
            PIPELINE,
            batches,
            stuck,
            settings().withShutdownGrace(Duration.ofMillis(500)),
            wiring(HealthGate.ALWAYS_NORMAL, Clock.systemUTC()));
    produce(DeleteIdsHandler.batch(table, 1, 2));
    await().atMost(Duration.ofSeconds(60)).until(() -> running.getCount() == 0);

    CompletableFuture<Void> closed = CompletableFuture.runAsync(sink::close);
    // The configured half second, not the default 30 s.
    await().atMost(Duration.ofSeconds(15)).until(closed::isDone);
    closed.get();

    try (Sink next = deleting(settings(), Clock.systemUTC())) {
      await()
          .atMost(TIMEOUT)
          .alias("the batch given up on is not committed: the next sink runs it")
          .until(() -> remaining(1, 2) == 0);
    }
  }

  private void produce(byte[]... values) {
    Map<String, Object> p =
        Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, infra().bootstrapServers());
    try (KafkaProducer<byte[], byte[]> producer =
        new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
      for (byte[] v : values) {
        producer.send(new ProducerRecord<>(batches, table.toString().getBytes(), v));
      }
      producer.flush();
    }
  }

  @Test
  void should_delete_every_row_of_every_batch() throws Exception {
    try (Sink sink =
        Sink.start(
            PIPELINE,
            batches,
            new DeleteIdsHandler(DB, 7),
            settings(),
            wiring(HealthGate.ALWAYS_NORMAL, Clock.systemUTC()))) {
      produce(
          DeleteIdsHandler.batch(table, 1, 100),
          DeleteIdsHandler.batch(table, 101, 200),
          DeleteIdsHandler.batch(table, 201, 300));
      await().atMost(TIMEOUT).until(() -> remaining(1, 300) == 0);
      assertThat(remaining(301, 1000)).isEqualTo(700);
      assertThat(sink.metrics().rowsCount()).isEqualTo(300);
    }
  }

  @Test
  void should_run_a_batch_again_after_its_handler_threw_an_error_instead_of_hanging()
      throws Exception {
    java.util.concurrent.atomic.AtomicInteger calls =
        new java.util.concurrent.atomic.AtomicInteger();
    DeleteIdsHandler handler =
        new DeleteIdsHandler(DB, 7) {
          @Override
          public Outcome execute(SinkRecord record, RunContext context) throws Exception {
            if (calls.incrementAndGet() == 1) {
              // Not an Exception: what a broken handler class or a stack overflow throws.
              throw new AssertionError("handler broke");
            }
            return super.execute(record, context);
          }
        };
    try (Sink sink =
        Sink.start(
            PIPELINE,
            batches,
            handler,
            settings(),
            wiring(HealthGate.ALWAYS_NORMAL, Clock.systemUTC()))) {
      produce(DeleteIdsHandler.batch(table, 1, 50));
      await().atMost(TIMEOUT).until(() -> remaining(1, 50) == 0);
      assertThat(calls.get()).isGreaterThanOrEqualTo(2);
      assertThat(sink.failure()).isEmpty();
    }
  }

  @Test
  void should_pause_while_a_long_transaction_locks_the_table_and_resume_after() throws Exception {
    HealthThresholds thresholds =
        new HealthThresholds(
            21,
            42,
            1L << 40,
            1L << 41,
            Duration.ofHours(1),
            Duration.ofHours(2),
            1L << 40,
            1L << 41,
            1L << 40,
            1L << 41,
            0.99,
            1.0,
            Duration.ofSeconds(1),
            Duration.ofHours(1),
            List.of());
    try (HealthMonitor monitor =
            new HealthMonitor(
                new HealthMonitor.Settings(
                    Duration.ofMillis(100), Duration.ofSeconds(1), thresholds),
                Map.of(DB, ds),
                Clock.systemUTC(),
                registry);
        Connection holder = ds.getConnection()) {
      monitor.addIndicators(
          DB,
          StandardIndicators.forDatabase(thresholds, null, Clock.systemUTC(), latency::p95Seconds));
      monitor.state(DB, table); // watch the table from the first sample on
      monitor.start();
      holder.setAutoCommit(false);
      try (Statement s = holder.createStatement()) {
        // An application transaction that reads the table and stays open.
        s.execute("SET application_name = 'app'");
        s.executeQuery("SELECT count(*) FROM " + table.quoted()).close();
      }
      await().atMost(TIMEOUT).until(() -> monitor.state(DB, table).isStop());

      try (Sink sink =
          Sink.start(
              PIPELINE,
              batches,
              new DeleteIdsHandler(DB, 10),
              settings(),
              wiring(monitor, Clock.systemUTC()))) {
        produce(DeleteIdsHandler.batch(table, 1, 50));
        await().atMost(TIMEOUT).until(() -> sink.metrics().pausedPartitionCount() > 0);
        int loops = sink.loops();
        await().atMost(TIMEOUT).until(() -> sink.loops() >= loops + 20);
        assertThat(remaining(1, 50)).as("no row touched while STOP").isEqualTo(50);

        holder.commit();
        await().atMost(TIMEOUT).until(() -> remaining(1, 50) == 0);
        assertThat(monitor.state(DB, table)).isEqualTo(Health.NORMAL);
      }
    }
  }

  @Test
  void should_hold_batches_while_their_database_is_unreachable_and_run_them_after()
      throws Exception {
    DatabaseEndpoint direct = databases.endpoint(DB);
    CountDownLatch inProgress = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    java.util.concurrent.atomic.AtomicBoolean stall =
        new java.util.concurrent.atomic.AtomicBoolean();
    DeleteIdsHandler handler =
        new DeleteIdsHandler(DB, 10) {
          @Override
          void afterSubBatch(RunContext context) throws InterruptedException {
            if (stall.getAndSet(false)) {
              inProgress.countDown();
              release.await();
            }
          }
        };
    try (TcpProxy proxy = new TcpProxy(direct.host(), direct.port());
        Databases through = new Databases(List.of(proxy.relaying(direct, 4)), registry);
        HealthMonitor monitor =
            new HealthMonitor(
                new HealthMonitor.Settings(
                    Duration.ofMillis(100), Duration.ofSeconds(1), HealthThresholds.defaults()),
                Map.of(DB, through.unpooledSource(DB)),
                Clock.systemUTC(),
                registry)) {
      monitor.state(DB, table); // watch the table from the first sample on
      monitor.start();
      try (Sink sink =
          Sink.start(
              PIPELINE,
              batches,
              handler,
              settings(),
              wiring(monitor, Clock.systemUTC(), through.dataSource(DB)))) {
        produce(DeleteIdsHandler.batch(table, 1, 20));
        await().atMost(TIMEOUT).until(() -> remaining(1, 20) == 0);
        stall.set(true);
        produce(DeleteIdsHandler.batch(table, 21, 50));
        await().atMost(TIMEOUT).until(() -> inProgress.getCount() == 0);

        proxy.cut(); // the server goes away mid-batch: connections end, new ones are refused
        await()
            .atMost(Duration.ofSeconds(10))
            .alias("STOP well before the pool's 30 s connection timeout")
            .until(() -> monitor.state(DB, table).isStop());
        assertThat(monitor.state(DB, table).reason()).startsWith("database sink unreachable: ");
        release.countDown(); // the batch in flight goes on, into the outage
        produce(DeleteIdsHandler.batch(table, 51, 60));
        await().atMost(TIMEOUT).until(() -> sink.metrics().pausedPartitionCount() > 0);
        int loops = sink.loops();
        await().atMost(TIMEOUT).until(() -> sink.loops() >= loops + 20);

        proxy.open();
        await().atMost(TIMEOUT).until(() -> remaining(21, 60) == 0);
        assertThat(monitor.state(DB, table)).isEqualTo(Health.NORMAL);
        assertThat(monitor.readings())
            .filteredOn(r -> r.indicator().equals("connection"))
            .singleElement()
            .satisfies(r -> assertThat(r.health()).isEqualTo(Health.NORMAL));
        assertThat(sink.metrics().deadLetteredCount()).isZero();
        assertThat(sink.failure()).isEmpty();
      }
    }
  }

  @Test
  void should_requeue_a_batch_that_reaches_its_limit_and_finish_it_later() throws Exception {
    SinkSettings settings =
        settings().withLimits(10, Duration.ofMinutes(1)).withAttempts(100, Duration.ofMinutes(10));
    try (Sink sink = deleting(settings, Clock.systemUTC())) {
      produce(DeleteIdsHandler.batch(table, 1, 45), DeleteIdsHandler.batch(table, 46, 50));
      await().atMost(TIMEOUT).until(() -> remaining(1, 50) == 0);
      assertThat(sink.metrics().requeuedCount())
          .as("runs that stopped at 10 rows")
          .isGreaterThanOrEqualTo(4);
      assertThat(sink.metrics().delayedCount()).isZero();
    }
  }

  @Test
  void should_delay_after_the_last_attempt_until_consume_after_passes() throws Exception {
    SettableClock clock = new SettableClock(Instant.parse("2026-01-01T00:00:00Z"));
    SinkSettings settings =
        settings().withLimits(10, Duration.ofHours(1)).withAttempts(1, Duration.ofMinutes(10));
    try (Sink sink = deleting(settings, clock)) {
      produce(DeleteIdsHandler.batch(table, 1, 30));
      await().atMost(TIMEOUT).until(() -> sink.metrics().delayedCount() == 1);
      assertThat(remaining(1, 30)).isEqualTo(20);
      long seen = sink.releaserLoops();
      await().atMost(TIMEOUT).until(() -> sink.releaserLoops() >= seen + 10);
      assertThat(sink.released()).as("not due before consume-after").isZero();
      assertThat(remaining(1, 30)).isEqualTo(20);

      clock.advance(Duration.ofMinutes(10));
      await().atMost(TIMEOUT).until(() -> sink.released() == 1);
      await().atMost(TIMEOUT).until(() -> remaining(1, 30) == 10);
      await().atMost(TIMEOUT).until(() -> sink.metrics().delayedCount() == 2);
      clock.advance(Duration.ofMinutes(10));
      await().atMost(TIMEOUT).until(() -> remaining(1, 30) == 0);
    }
  }

  /**
   * A batch on the delay topic (made by a sink's start), due at {@code due}, back to {@link
   * #batches} then.
   */
  private void delayedUntil(Instant due, byte[] value) {
    Map<String, Object> p =
        Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, infra().bootstrapServers());
    try (KafkaProducer<byte[], byte[]> producer =
        new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
      RecordHeaders h = new RecordHeaders();
      h.add(SinkHeaders.CONSUME_AFTER, SinkHeaders.longValue(due.toEpochMilli()));
      h.add(SinkHeaders.BATCHES_TOPIC, SinkHeaders.text(batches));
      // one key: one partition of the delay topic, in this order
      producer.send(
          new ProducerRecord<>(
              topics.delayed(PIPELINE), null, table.toString().getBytes(), value, h));
      producer.flush();
    }
  }

  /** Another table, not at STOP, with the ids 1 to 10. */
  private TableName othersWithTenRows() {
    TableName others = new TableName(schema, "others");
    TestSql.exec(
        ds,
        "CREATE TABLE " + others.quoted() + " (id bigint PRIMARY KEY)",
        "INSERT INTO " + others.quoted() + " SELECT g FROM generate_series(1, 10) g");
    return others;
  }

  @Test
  void should_step_a_batch_held_at_stop_aside_so_the_batches_behind_it_run() throws Exception {
    TableName others = othersWithTenRows();
    java.util.concurrent.atomic.AtomicReference<Health> children =
        new java.util.concurrent.atomic.AtomicReference<>(new Health.Stop("an operator's switch"));
    HealthGate gate = (db, t) -> table.equals(t) ? children.get() : Health.NORMAL;
    SettableClock clock = new SettableClock(Instant.parse("2026-01-01T00:00:00Z"));
    try (Sink sink =
        Sink.start(
            PIPELINE,
            batches,
            new DeleteIdsHandler(DB, 5),
            settings().withStepAsideAfter(Duration.ofMillis(200)),
            wiring(gate, clock))) {
      // one key, one partition: the batch for the table at STOP first
      produce(DeleteIdsHandler.batch(table, 1, 10), DeleteIdsHandler.batch(others, 1, 10));
      await()
          .atMost(TIMEOUT)
          .until(() -> TestSql.count(ds, "SELECT count(*) FROM " + others.quoted()) == 0);
      assertThat(remaining(1, 10)).isEqualTo(10);
      assertThat(sink.metrics().delayedCount()).isOne();
      assertThat(registry.get("spillway_sink_stepped_aside").counter().count()).isOne();
      List<ConsumerRecord<byte[], byte[]>> aside =
          TopicReader.readAtLeast(infra().bootstrapServers(), topics.delayed(PIPELINE), 1, TIMEOUT);
      assertThat(
              SinkHeaders.text(
                  aside.get(0).headers().lastHeader(SinkHeaders.STEPPED_ASIDE).value()))
          .isEqualTo(table + " is at STOP: an operator's switch");

      children.set(Health.NORMAL);
      clock.advance(SinkSettings.DEFAULT_CONSUME_AFTER);
      await().atMost(TIMEOUT).until(() -> remaining(1, 10) == 0);
      assertThat(sink.released()).isOne();
    }
  }

  /**
   * Three batches for a table at STOP, all in hand, then one for another table written after the
   * partition paused: a paused partition fetches nothing, so only Kafka's end offset shows it.
   */
  @Test
  void should_step_aside_for_a_batch_written_after_its_partition_paused() throws Exception {
    TableName others = othersWithTenRows();
    HealthGate gate =
        (db, t) -> table.equals(t) ? new Health.Stop("an operator's switch") : Health.NORMAL;
    SinkSettings settings =
        settings().withMaxInFlight(4).withStepAsideAfter(Duration.ofMillis(200));
    SettableClock clock = new SettableClock(Instant.parse("2026-01-01T00:00:00Z"));
    Sink.start(PIPELINE, batches, new DeleteIdsHandler(DB, 5), settings, wiring(gate, clock))
        .close(); // makes the topics
    produce(
        DeleteIdsHandler.batch(table, 1, 3),
        DeleteIdsHandler.batch(table, 4, 6),
        DeleteIdsHandler.batch(table, 7, 10));
    try (Sink sink =
        Sink.start(PIPELINE, batches, new DeleteIdsHandler(DB, 5), settings, wiring(gate, clock))) {
      await().atMost(TIMEOUT).until(() -> sink.metrics().pausedPartitionCount() == 1);
      // polls of 100 ms: a fetch sent before the pause (waiting up to 500 ms) has ended by then
      int seen = sink.loops();
      await().atMost(TIMEOUT).until(() -> sink.loops() >= seen + 15);
      produce(DeleteIdsHandler.batch(others, 1, 10));
      await()
          .atMost(TIMEOUT)
          .until(() -> TestSql.count(ds, "SELECT count(*) FROM " + others.quoted()) == 0);
      assertThat(remaining(1, 10)).isEqualTo(10);
      assertThat(registry.get("spillway_sink_stepped_aside").counter().count()).isEqualTo(3);
    }
  }

  @Test
  void should_release_a_delayed_batch_when_due_though_one_due_later_is_ahead_of_it()
      throws Exception {
    Instant start = Instant.parse("2026-01-01T00:00:00Z");
    SettableClock clock = new SettableClock(start);
    try (Sink sink = deleting(settings(), clock)) {
      delayedUntil(start.plus(Duration.ofMinutes(10)), DeleteIdsHandler.batch(table, 1, 10));
      delayedUntil(start.plusSeconds(1), DeleteIdsHandler.batch(table, 11, 20));
      await().atMost(TIMEOUT).until(() -> sink.delayedWaiting() == 2);
      assertThat(registry.get("spillway_sink_delayed_waiting").gauge().value()).isEqualTo(2);
      clock.advance(Duration.ofSeconds(1));
      await().atMost(TIMEOUT).until(() -> remaining(11, 20) == 0);
      assertThat(remaining(1, 10)).as("not due before its 10 minutes").isEqualTo(10);
      assertThat(sink.released()).isOne();
    }

    // Another start reads the partition again from the batch not released, and passes over the
    // one released behind it.
    try (Sink again = deleting(settings(), clock)) {
      await().atMost(TIMEOUT).until(() -> again.delayedWaiting() == 1);
      long seen = again.releaserLoops();
      await().atMost(TIMEOUT).until(() -> again.releaserLoops() >= seen + 5);
      assertThat(again.released()).as("the released batch not released twice").isZero();

      clock.advance(Duration.ofMinutes(10));
      await().atMost(TIMEOUT).until(() -> remaining(1, 10) == 0);
      assertThat(again.released()).isOne();
    }
  }

  @Test
  void should_dead_letter_a_poison_batch_while_the_others_finish() throws Exception {
    byte[] poison = "not a batch".getBytes(StandardCharsets.UTF_8);
    try (Sink sink =
        Sink.start(
            PIPELINE,
            batches,
            new DeleteIdsHandler(DB, 10),
            settings(),
            wiring(HealthGate.ALWAYS_NORMAL, Clock.systemUTC()))) {
      produce(DeleteIdsHandler.batch(table, 1, 20), poison, DeleteIdsHandler.batch(table, 21, 40));
      await().atMost(TIMEOUT).until(() -> remaining(1, 40) == 0);
      List<ConsumerRecord<byte[], byte[]>> dead =
          TopicReader.readAtLeast(infra().bootstrapServers(), topics.dlq(PIPELINE), 1, TIMEOUT);
      assertThat(dead).hasSize(1);
      ConsumerRecord<byte[], byte[]> d = dead.get(0);
      assertThat(d.value()).isEqualTo(poison);
      assertThat(SinkHeaders.text(d.headers().lastHeader(SinkHeaders.ERROR_CLASS).value()))
          .isEqualTo(IllegalArgumentException.class.getName());
      assertThat(SinkHeaders.text(d.headers().lastHeader(SinkHeaders.ERROR_MESSAGE).value()))
          .startsWith("Malformed batch at " + batches);
      assertThat(d.headers().lastHeader(SinkHeaders.ATTEMPTS).value())
          .as("failed on its first run")
          .isEqualTo(new byte[] {0, 0, 0, 0});
      assertThat(sink.metrics().deadLetteredCount()).isEqualTo(1);
    }
  }

  @Test
  void should_dead_letter_a_batch_whose_sql_fails_permanently() throws Exception {
    TableName missing = new TableName(schema, "no_such_table");
    try (Sink sink =
        Sink.start(
            PIPELINE,
            batches,
            new DeleteIdsHandler(DB, 10),
            settings(),
            wiring(HealthGate.ALWAYS_NORMAL, Clock.systemUTC()))) {
      produce(DeleteIdsHandler.batch(missing, 1, 5), DeleteIdsHandler.batch(table, 1, 5));
      await().atMost(TIMEOUT).until(() -> remaining(1, 5) == 0);
      ConsumerRecord<byte[], byte[]> d =
          TopicReader.readAtLeast(infra().bootstrapServers(), topics.dlq(PIPELINE), 1, TIMEOUT)
              .get(0);
      assertThat(SinkHeaders.text(d.headers().lastHeader(SinkHeaders.ERROR_MESSAGE).value()))
          .contains("does not exist");
    }
  }

  @Test
  void should_redeliver_a_batch_abandoned_mid_run_and_miss_no_row() throws Exception {
    CountDownLatch inProgress = new CountDownLatch(1);
    DeleteIdsHandler stalls =
        new DeleteIdsHandler(DB, 5) {
          @Override
          void afterSubBatch(RunContext context) throws InterruptedException {
            inProgress.countDown();
            new CountDownLatch(1).await(); // hangs until the worker is killed
          }
        };
    Sink first =
        Sink.start(
            PIPELINE,
            batches,
            stalls,
            settings(),
            wiring(HealthGate.ALWAYS_NORMAL, Clock.systemUTC()));
    produce(DeleteIdsHandler.batch(table, 1, 30));
    await().atMost(TIMEOUT).until(() -> inProgress.getCount() == 0);
    assertThat(remaining(1, 30)).isEqualTo(25);
    first.close(Duration.ZERO); // like a crash: nothing in hand is committed
    long rowsBefore = first.metrics().rowsCount(); // the same counter carries on in one registry

    try (Sink second = deleting(settings(), Clock.systemUTC())) {
      await().atMost(TIMEOUT).until(() -> remaining(1, 30) == 0);
      assertThat(second.metrics().rowsCount() - rowsBefore)
          .as("the rest, run again by the new owner")
          .isEqualTo(25);
    }
  }

  @Test
  void should_throttle_when_an_indicator_throws_and_keep_working() throws Exception {
    HealthIndicator broken =
        new HealthIndicator() {
          @Override
          public String name() {
            return "broken";
          }

          @Override
          public Health sample(Connection connection, TableName t) {
            throw new IllegalStateException("view not readable");
          }
        };
    try (HealthMonitor monitor =
        new HealthMonitor(
            new HealthMonitor.Settings(
                Duration.ofMillis(50), Duration.ofSeconds(30), HealthThresholds.defaults()),
            Map.of(DB, ds),
            Clock.systemUTC(),
            registry)) {
      monitor.addIndicators(DB, List.of(broken));
      monitor.runOnce();
      assertThat(monitor.state(DB, null)).isInstanceOf(Health.Unknown.class);
      assertThat(monitor.readings())
          .anySatisfy(
              r ->
                  assertThat(r.health().reason())
                      .contains("broken could not be read: view not readable"));
      monitor.start();

      DeleteIdsHandler handler = new DeleteIdsHandler(DB, 40);
      try (Sink sink =
          Sink.start(PIPELINE, batches, handler, settings(), wiring(monitor, Clock.systemUTC()))) {
        produce(DeleteIdsHandler.batch(table, 1, 40));
        await().atMost(TIMEOUT).until(() -> remaining(1, 40) == 0);
        assertThat(handler.sizes).as("sub-batches shrunk to a quarter").allMatch(s -> s == 10);
        assertThat(sink.failure()).isEmpty();
      }
    }
  }
}
