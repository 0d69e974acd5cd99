package dev.spillway.buffers;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.spillway.config.ConfigException;
import dev.spillway.config.ConfigLoader;
import dev.spillway.config.DatabaseConfig;
import dev.spillway.config.SpillwayConfig;
import dev.spillway.event.EventSerdes;
import dev.spillway.event.Pipeline;
import dev.spillway.event.TableName;
import dev.spillway.health.Health;
import dev.spillway.health.HealthMonitor;
import dev.spillway.health.StandardIndicators;
import dev.spillway.jdbc.DatabaseEndpoint;
import dev.spillway.ops.ConsumerLagGauges;
import dev.spillway.ops.StatusClient;
import dev.spillway.ops.StatusReport;
import dev.spillway.runtime.SpillwayRuntime;
import dev.spillway.sink.SinkHeaders;
import dev.spillway.streams.Changelogs;
import dev.spillway.testing.BulkReceiver;
import dev.spillway.testing.Cli;
import dev.spillway.testing.EmbeddedInfra;
import dev.spillway.testing.TableIndicator;
import dev.spillway.testing.TestSql;
import dev.spillway.testing.TopicReader;
import java.io.StringReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import javax.sql.DataSource;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.postgresql.PGConnection;

/**
 * The whole pipeline on the shared embedded PostgreSQL and Kafka: single-row inserts into a buffer
 * table are captured, batched by size and by wait, posted to an HTTP endpoint and deleted.
 */
class BufferPipelineIT {
  private static final Duration TIMEOUT = Duration.ofSeconds(90);

  /** A test's part once Spillway runs its buffers over the tables it asked for. */
  private interface Body {
    void run(SpillwayRuntime runtime, DataSource ds, String schema) throws Exception;
  }

  /**
   * Creates a schema of its own with {@code tables}, starts Spillway with {@code buffers} (YAML
   * entries under {@code buffers:}) on the shared embedded PostgreSQL and Kafka, runs {@code body}
   * and drops the schema, slot and publication. Both functions get the schema's name.
   */
  private static void withBuffers(
      Path dir, Function<String, String> buffers, Function<String, List<String>> tables, Body body)
      throws Exception {
    withBuffers(dir, List.of(), buffers, tables, body);
  }

  /**
   * The same with databases besides {@code main}, named so in the configuration, each with the same
   * schema and tables.
   */
  private static void withBuffers(
      Path dir,
      List<String> others,
      Function<String, String> buffers,
      Function<String, List<String>> tables,
      Body body)
      throws Exception {
    EmbeddedInfra infra = EmbeddedInfra.get();
    Map<String, String> databases = new LinkedHashMap<>(); // Spillway's name → the server's
    databases.put("main", "pipeline");
    others.forEach(name -> databases.put(name, "pipeline_" + name));
    String id = UUID.randomUUID().toString().replace("-", "").substring(0, 8);
    String prefix = "p" + id;
    String schema = "s" + id;
    StringBuilder entries = new StringBuilder();
    databases.forEach(
        (name, onServer) -> {
          DatabaseEndpoint db = infra.database(onServer);
          entries.append(
              String.format(
                  "  %s: { url: \"%s\", username: %s }%n", name, db.url(), db.username()));
        });
    String yaml =
        String.format(
                """
                http: { port: 0 }
                kafka: { bootstrap-servers: "%s", topic-prefix: %s, partitions: 3 }
                databases:
                %sbuffers:
                """,
                infra.bootstrapServers(), prefix, entries)
            + buffers.apply(schema);
    // Also on disk, for the commands a test runs against this Spillway.
    Files.writeString(dir.resolve("spillway.yml"), yaml);
    SpillwayConfig config = ConfigLoader.parse(yaml, "test.yml", dir, name -> null);
    BufferPipeline pipeline = BufferPipeline.fromConfig(config);
    try (SpillwayRuntime runtime = SpillwayRuntime.start(config, Set.of(), Clock.systemUTC())) {
      for (String name : databases.keySet()) {
        DataSource ds = runtime.databases().dataSource(name);
        TestSql.exec(ds, "CREATE SCHEMA " + schema);
        TestSql.exec(ds, tables.apply(schema).toArray(String[]::new));
      }
      pipeline.start(runtime, Clock.systemUTC());
      runtime.startCapture(pipeline.routes(runtime.topics()));
      body.run(runtime, runtime.databases().dataSource("main"), schema);
    } finally {
      for (Map.Entry<String, String> db : databases.entrySet()) {
        try (var opened = infra.databases(db.getValue())) {
          DataSource ds = opened.dataSource(db.getValue());
          TestSql.dropCapture(ds, prefix + "_" + db.getKey());
          TestSql.exec(ds, "DROP SCHEMA IF EXISTS " + schema + " CASCADE");
        }
      }
    }
  }

  /** A class handler counting how often it is closed. */
  public static final class CountedHandler implements BulkHandler {
    static final AtomicInteger CLOSED = new AtomicInteger();

    @Override
    public Result handle(Batch batch) {
      return Result.success();
    }

    @Override
    public void close() {
      CLOSED.incrementAndGet();
    }
  }

  @Test
  void should_close_each_handler_once_whether_the_start_stops_at_a_later_buffer_or_runs(
      @TempDir Path dir) throws Exception {
    String counted =
        """
          activity:
            table: %s.contact_activity_events
            handler: { class: dev.spillway.buffers.BufferPipelineIT$CountedHandler }
        """;
    CountedHandler.CLOSED.set(0);
    assertThatThrownBy(
            () ->
                withBuffers(
                    dir,
                    schema ->
                        String.format(counted, schema)
                            + String.format(
                                """
                                  missing:
                                    table: %s.no_such_table
                                    handler: { class: dev.spillway.buffers.BufferPipelineIT$CountedHandler }
                                """,
                                schema),
                    schema -> activityTable(schema),
                    (runtime, ds, schema) -> {}))
        .isInstanceOf(ConfigException.class)
        .hasMessageContaining("no_such_table");
    assertThat(CountedHandler.CLOSED.get())
        .as("the handler made for the buffer checked before the unfit one")
        .isEqualTo(1);

    CountedHandler.CLOSED.set(0);
    withBuffers(
        dir,
        schema -> String.format(counted, schema),
        schema -> activityTable(schema),
        (runtime, ds, schema) ->
            assertThat(CountedHandler.CLOSED.get()).as("while the buffer runs").isZero());
    assertThat(CountedHandler.CLOSED.get()).as("once Spillway stopped").isEqualTo(1);
  }

  @Test
  void should_turn_single_row_inserts_into_bulk_calls_and_empty_the_table(@TempDir Path dir)
      throws Exception {
    try (BulkReceiver receiver = new BulkReceiver()) {
      withBuffers(
          dir,
          schema ->
              String.format(
                  """
                    activity:
                      table: %s.contact_activity_events
                      batch-size: 5
                      max-wait: 3s
                      handler:
                        http: { url: "%s", headers: { Authorization: "Bearer t" } }
                  """,
                  schema, receiver.url()),
          schema -> activityTable(schema),
          (runtime, ds, schema) -> {
            try (Connection c = ds.getConnection();
                PreparedStatement ps =
                    c.prepareStatement(
                        "INSERT INTO "
                            + schema
                            + ".contact_activity_events (contact_id, activity)"
                            + " VALUES (?, 'call')")) {
              for (int i = 0; i < 12; i++) {
                ps.setLong(1, 100 + i);
                ps.executeUpdate(); // one transaction per row, as an application writes them
              }
            }

            await().atMost(TIMEOUT).until(() -> receiver.rows() >= 12);
            awaitEmptied(ds, schema);
            List<BulkReceiver.Call> calls = receiver.calls();
            assertThat(calls.stream().map(c -> c.rows().size()).sorted().toList())
                .as("two batches closed by size, the rest by wait")
                .containsExactly(2, 5, 5);
            assertThat(
                    calls.stream()
                        .map(
                            c ->
                                c.rows().stream()
                                    .map(r -> ((Number) r.get("contact_id")).longValue())
                                    .toList())
                        .sorted(Comparator.comparing(ids -> ids.get(0)))
                        .toList())
                .as("each call's rows in the order they were inserted")
                .containsExactly(
                    List.of(100L, 101L, 102L, 103L, 104L),
                    List.of(105L, 106L, 107L, 108L, 109L),
                    List.of(110L, 111L));
            Set<String> keys = new HashSet<>();
            calls.forEach(c -> keys.add(c.idempotencyKey()));
            assertThat(keys).hasSize(3).doesNotContainNull();
            assertThat(calls.get(0).rows().get(0)).containsKeys("id", "contact_id", "activity");

            StatusReport status = StatusClient.fetch(runtime.httpPort());
            assertThat(status.buffers())
                .singleElement()
                .satisfies(
                    b -> {
                      assertThat(b.name()).isEqualTo("activity");
                      assertThat(b.rowsWaiting()).isZero();
                      assertThat(b.handledEvents()).isEqualTo(12);
                      assertThat(b.batchesInFlight()).isZero();
                      assertThat(b.deadLetteredBatches()).isZero();
                      assertThat(b.insertToHandledP99Millis())
                          .isGreaterThan(0)
                          .isGreaterThanOrEqualTo(b.insertToHandledP50Millis());
                    });
            assertThat(runtime.registry().scrape())
                .contains("spillway_buffer_insert_to_handled_seconds_count{buffer=\"activity\"} 12")
                .contains("spillway_buffer_rows_waiting{buffer=\"activity\"} 0.0");
            // The sink's consumer group, read from Kafka on the lag gauges' schedule.
            String prefix = runtime.config().kafka().topicPrefix();
            await()
                .atMost(ConsumerLagGauges.INTERVAL.multipliedBy(3))
                .untilAsserted(
                    () ->
                        assertThat(runtime.registry().scrape())
                            .contains(
                                "spillway_consumer_lag_records{group=\""
                                    + prefix
                                    + ".buffers.sink\",topic=\""
                                    + prefix
                                    + ".buffers.activity.batches\"} 0.0"));
            // The same reading in the status report.
            StatusReport withLag = StatusClient.fetch(runtime.httpPort());
            assertThat(withLag.lagReadAt()).isNotNull();
            assertThat(withLag.lag())
                .contains(
                    new StatusReport.LagStatus(
                        prefix + ".buffers.sink",
                        prefix + ".buffers.activity.batches",
                        runtime.config().kafka().partitions(),
                        0,
                        null,
                        null,
                        1));
            // Lag 0 above although the batches were written in the Streams application's
            // transactions, each ended by a marker: a batch a crash aborts is never seen.
            String application = runtime.topics().streamsApplication(Pipeline.BUFFERS, "activity");
            try (Admin admin =
                Admin.create(Map.of("bootstrap.servers", runtime.bootstrapServers()))) {
              assertThat(admin.listTransactions().all().get())
                  .extracting(TransactionListing::transactionalId)
                  .anyMatch(id -> id.startsWith(application + "-"));
              // Its stores' changelogs, nearly all tombstones, are compacted soon.
              List<ConfigResource> changelogs =
                  Stream.of("pending-events", "inserts-seen")
                      .map(
                          store ->
                              new ConfigResource(
                                  ConfigResource.Type.TOPIC,
                                  application + "-" + store + "-changelog"))
                      .toList();
              assertThat(admin.describeConfigs(changelogs).all().get().values())
                  .hasSize(2)
                  .allSatisfy(
                      config -> {
                        String ms = String.valueOf(Changelogs.COMPACTED_WITHIN.toMillis());
                        assertThat(config.get("max.compaction.lag.ms").value()).isEqualTo(ms);
                        assertThat(config.get("delete.retention.ms").value()).isEqualTo(ms);
                        assertThat(config.get("cleanup.policy").value()).isEqualTo("compact");
                      });
            }
          });
    }
  }

  @Test
  void should_run_a_buffer_per_database_over_tables_of_the_same_name(@TempDir Path dir)
      throws Exception {
    try (BulkReceiver receiver = new BulkReceiver()) {
      withBuffers(
          dir,
          List.of("shard2"),
          schema ->
              String.format(
                  """
                    activity_main:
                      table: %1$s.contact_activity_events
                      max-wait: 200ms
                      handler:
                        http: { url: "%2$s", headers: { X-Shard: main } }
                    activity_shard2:
                      table: %1$s.contact_activity_events
                      database: shard2
                      max-wait: 200ms
                      handler:
                        http: { url: "%2$s", headers: { X-Shard: shard2 } }
                  """,
                  schema, receiver.url()),
          BufferPipelineIT::activityTable,
          (runtime, ds, schema) -> {
            DataSource shard2 = runtime.databases().dataSource("shard2");
            String insert =
                "INSERT INTO " + schema + ".contact_activity_events (contact_id, activity) VALUES";
            TestSql.exec(ds, insert + " (1, 'call')", insert + " (2, 'call')");
            TestSql.exec(shard2, insert + " (3, 'call')");

            await().atMost(TIMEOUT).until(() -> receiver.rows() >= 3);
            awaitEmptied(ds, schema);
            awaitEmptied(shard2, schema);
            Map<String, List<Long>> byShard = new TreeMap<>();
            receiver
                .calls()
                .forEach(
                    c ->
                        c.rows()
                            .forEach(
                                r ->
                                    byShard
                                        .computeIfAbsent(
                                            c.headers().get("x-shard"), k -> new ArrayList<>())
                                        .add(((Number) r.get("contact_id")).longValue())));
            byShard.values().forEach(ids -> ids.sort(null));
            assertThat(byShard)
                .as("each database's rows by its own buffer, once")
                .isEqualTo(Map.of("main", List.of(1L, 2L), "shard2", List.of(3L)));

            // A buffer table's routine autovacuum slows no buffer; another table's slows its work.
            TableName buffered = new TableName(schema, "contact_activity_events");
            TableName other = new TableName(schema, "merge_requests");
            HealthMonitor health = runtime.health();
            for (String db : List.of("main", "shard2")) {
              health.addIndicators(
                  db,
                  List.of(
                      new TableIndicator(
                          StandardIndicators.AUTOVACUUM, new Health.Throttle("autovacuum runs"))));
              health.state(db, buffered);
            }
            health.state("main", other);
            health.runOnce();
            assertThat(health.state("main", buffered)).isEqualTo(Health.NORMAL);
            assertThat(health.state("shard2", buffered)).isEqualTo(Health.NORMAL);
            assertThat(health.state("main", other))
                .isEqualTo(new Health.Throttle("autovacuum: autovacuum runs"));
          });
    }
  }

  @Test
  void should_give_each_batch_of_rows_one_copy_wrote_a_group_id_of_its_own(@TempDir Path dir)
      throws Exception {
    try (BulkReceiver receiver = new BulkReceiver()) {
      withBuffers(
          dir,
          schema ->
              String.format(
                  """
                    activity:
                      table: %s.contact_activity_events
                      batch-size: 4
                      max-wait: 3s
                      handler:
                        http: { url: "%s" }
                  """,
                  schema, receiver.url()),
          schema -> activityTable(schema),
          (runtime, ds, schema) -> {
            // COPY writes rows of one page in one WAL record: they share its position and commit.
            StringBuilder rows = new StringBuilder();
            for (int i = 0; i < 12; i++) {
              rows.append(200 + i).append("\tcall\n");
            }
            try (Connection c = ds.getConnection()) {
              long copied =
                  c.unwrap(PGConnection.class)
                      .getCopyAPI()
                      .copyIn(
                          "COPY "
                              + schema
                              + ".contact_activity_events (contact_id, activity) FROM STDIN",
                          new StringReader(rows.toString()));
              assertThat(copied).isEqualTo(12);
            }

            // The case at hand: the rows share one WAL position (one multi-insert record).
            List<ConsumerRecord<byte[], byte[]>> events =
                TopicReader.readAtLeast(
                    runtime.bootstrapServers(),
                    runtime.topics().bufferEvents("activity"),
                    12,
                    TIMEOUT);
            assertThat(events)
                .extracting(r -> EventSerdes.decodeBufferEvent(r.value()).lsn())
                .containsOnly(EventSerdes.decodeBufferEvent(events.get(0).value()).lsn());
            await().atMost(TIMEOUT).until(() -> receiver.rows() >= 12);
            List<BulkReceiver.Call> calls = receiver.calls();
            assertThat(calls).hasSize(3);
            assertThat(calls)
                .as("a receiver keeping one answer per Idempotency-Key would drop two batches")
                .extracting(BulkReceiver.Call::idempotencyKey)
                .doesNotHaveDuplicates();
            assertThat(
                    calls.stream()
                        .flatMap(c -> c.rows().stream())
                        .map(r -> ((Number) r.get("contact_id")).longValue()))
                .containsExactlyInAnyOrderElementsOf(
                    Stream.iterate(200L, i -> i + 1).limit(12).toList());
            awaitEmptied(ds, schema);
          });
    }
  }

  /** Waits until the schema's buffer table has no row left. */
  private static void awaitEmptied(DataSource ds, String schema) {
    await()
        .atMost(TIMEOUT)
        .until(
            () ->
                TestSql.count(ds, "SELECT count(*) FROM " + schema + ".contact_activity_events")
                    == 0);
  }

  /** The buffer table most tests use, in {@code schema}. */
  private static List<String> activityTable(String schema) {
    return List.of(
        "CREATE TABLE "
            + schema
            + ".contact_activity_events (id bigint GENERATED ALWAYS AS IDENTITY"
            + " PRIMARY KEY, contact_id bigint NOT NULL, activity text NOT NULL)");
  }

  /** The README's way to try kept rows again: insert them anew, in one statement. */
  private static void insertAnew(DataSource ds, String table, String which) {
    TestSql.exec(
        ds,
        "WITH kept AS (DELETE FROM "
            + table
            + " WHERE "
            + which
            + " RETURNING *) INSERT INTO "
            + table
            + " OVERRIDING SYSTEM VALUE SELECT * FROM kept");
  }

  /** What a test does once its buffer's handler rejected the first batch, three rows. */
  private interface AfterRejection {
    void run(SpillwayRuntime runtime, DataSource ds, String table) throws Exception;
  }

  /**
   * A buffer whose receiver answers 400 until {@code accept} is set: three rows are inserted, their
   * batch is rejected and dead-lettered at once, and its rows are deleted or kept per {@code
   * onExhausted} before {@code body} runs.
   */
  private static void afterRejection(
      Path dir,
      BulkReceiver receiver,
      AtomicBoolean accept,
      String onExhausted,
      AfterRejection body)
      throws Exception {
    receiver.answering(
        n -> accept.get() ? BulkReceiver.Answer.ok() : BulkReceiver.Answer.status(400));
    withBuffers(
        dir,
        schema ->
            String.format(
                """
                  activity:
                    table: %s.contact_activity_events
                    batch-size: 3
                    max-wait: 5s
                    on-exhausted: %s
                    handler:
                      http: { url: "%s" }
                """,
                schema, onExhausted, receiver.url()),
        schema -> activityTable(schema),
        (runtime, ds, schema) -> {
          String table = schema + ".contact_activity_events";
          // One batch of three: it closes by size, well before max-wait.
          for (int i = 0; i < 3; i++) {
            TestSql.exec(
                ds, "INSERT INTO " + table + " (contact_id, activity) VALUES (" + i + ", 'call')");
          }
          await()
              .atMost(TIMEOUT)
              .until(
                  () ->
                      StatusClient.fetch(runtime.httpPort()).buffers().get(0).deadLetteredBatches()
                          == 1);
          long left = onExhausted.equals("keep") ? 3 : 0;
          await()
              .atMost(TIMEOUT)
              .until(() -> TestSql.count(ds, "SELECT count(*) FROM " + table) == left);
          body.run(runtime, ds, table);
        });
  }

  @Test
  void should_split_a_batch_whose_rows_would_pass_kafkas_record_limit(@TempDir Path dir)
      throws Exception {
    try (BulkReceiver receiver = new BulkReceiver()) {
      withBuffers(
          dir,
          schema ->
              String.format(
                  """
                    activity:
                      table: %s.contact_activity_events
                      batch-size: 1000
                      max-wait: 2s
                      handler:
                        http: { url: "%s" }
                  """,
                  schema, receiver.url()),
          schema -> activityTable(schema),
          (runtime, ds, schema) -> {
            // 600 rows of 4 kB in one transaction: 2.4 MB of events waiting for one batch of
            // 1,000, where Kafka takes at most 1 MiB in a record.
            TestSql.exec(
                ds,
                "INSERT INTO "
                    + schema
                    + ".contact_activity_events (contact_id, activity)"
                    + " SELECT g, repeat(md5(g::text), 125) FROM generate_series(1, 600) g");

            await()
                .atMost(TIMEOUT)
                .until(() -> receiver.rows() >= 600 || runtime.failure().isPresent());
            assertThat(runtime.failure()).isEmpty();
            awaitEmptied(ds, schema);
            List<BulkReceiver.Call> calls = receiver.calls();
            assertThat(calls).hasSizeGreaterThanOrEqualTo(3);
            assertThat(calls).allSatisfy(c -> assertThat(c.rows()).hasSizeLessThan(250));
            assertThat(calls.stream().mapToInt(c -> c.rows().size()).sum()).isEqualTo(600);
          });
    }
  }

  @Test
  void should_count_rows_too_large_for_kafka_and_unreadable_events_in_a_buffers_status(
      @TempDir Path dir) throws Exception {
    try (BulkReceiver receiver = new BulkReceiver()) {
      withBuffers(
          dir,
          schema ->
              String.format(
                  """
                    activity:
                      table: %s.contact_activity_events
                      batch-size: 10
                      max-wait: 200ms
                      handler:
                        http: { url: "%s" }
                  """,
                  schema, receiver.url()),
          schema -> activityTable(schema),
          (runtime, ds, schema) -> {
            try (KafkaProducer<byte[], byte[]> producer =
                new KafkaProducer<>(
                    Map.of("bootstrap.servers", runtime.bootstrapServers()),
                    new ByteArraySerializer(),
                    new ByteArraySerializer())) {
              producer
                  .send(
                      new ProducerRecord<>(
                          runtime.topics().bufferEvents("activity"),
                          (schema + ".contact_activity_events").getBytes(),
                          "not an event".getBytes()))
                  .get();
            }
            // 2 MB of text that does not compress: as an event, larger than a Kafka record.
            TestSql.exec(
                ds,
                "INSERT INTO "
                    + schema
                    + ".contact_activity_events (contact_id, activity)"
                    + " SELECT 1, string_agg(md5(g::text), '') FROM generate_series(1, 62500) g",
                "INSERT INTO "
                    + schema
                    + ".contact_activity_events (contact_id, activity) VALUES (2, 'small')");

            await()
                .atMost(TIMEOUT)
                .until(() -> receiver.rows() >= 1 || runtime.failure().isPresent());
            assertThat(runtime.failure()).isEmpty();
            await()
                .atMost(TIMEOUT)
                .untilAsserted(
                    () ->
                        assertThat(StatusClient.fetch(runtime.httpPort()).buffers())
                            .singleElement()
                            .satisfies(
                                b -> {
                                  assertThat(b.tooLargeRows()).isOne();
                                  assertThat(b.rowsWaiting()).as("the large row stays").isOne();
                                  assertThat(b.handledEvents()).isOne();
                                  assertThat(b.unreadableEvents()).isOne();
                                }));
            assertThat(runtime.registry().scrape())
                .contains(
                    "spillway_capture_rows_too_large_total{database=\"main\",table=\""
                        + schema
                        + ".contact_activity_events\"} 1.0");
          });
    }
  }

  @Test
  void should_answer_status_and_metrics_while_every_connection_of_the_pool_is_at_work(
      @TempDir Path dir) throws Exception {
    try (BulkReceiver receiver = new BulkReceiver()) {
      withBuffers(
          dir,
          schema ->
              String.format(
                  """
                    activity:
                      table: %s.contact_activity_events
                      handler:
                        http: { url: "%s" }
                  """,
                  schema, receiver.url()),
          schema -> activityTable(schema),
          (runtime, ds, schema) -> {
            List<Connection> held = new ArrayList<>();
            try {
              // As sink work holding them all would, or a database the pool waits for: a
              // connection asked for now waits 30 s, longer than a scrape or status call may.
              for (int i = 0; i < DatabaseConfig.DEFAULT_POOL_SIZE; i++) {
                held.add(ds.getConnection());
              }
              StatusReport status = StatusClient.fetch(runtime.httpPort()); // 30 s at most
              assertThat(status.databases())
                  .singleElement()
                  .extracting(StatusReport.DatabaseStatus::error)
                  .asString()
                  .startsWith("no answer within 2s");
              assertThat(status.buffers())
                  .singleElement()
                  .satisfies(b -> assertThat(b.rowsWaiting()).as("unknown").isEqualTo(-1));

              HttpResponse<String> metrics =
                  HttpClient.newHttpClient()
                      .send(
                          HttpRequest.newBuilder(
                                  URI.create("http://localhost:" + runtime.httpPort() + "/metrics"))
                              .timeout(Duration.ofSeconds(10)) // a scraper's default
                              .build(),
                          HttpResponse.BodyHandlers.ofString());
              assertThat(metrics.body())
                  .contains("spillway_buffer_rows_waiting{buffer=\"activity\"} -1.0");
            } finally {
              for (Connection c : held) {
                c.close();
              }
            }
            // Once connections are free again, the counts come back.
            await()
                .atMost(TIMEOUT)
                .untilAsserted(
                    () ->
                        assertThat(StatusClient.fetch(runtime.httpPort()).buffers())
                            .singleElement()
                            .satisfies(b -> assertThat(b.rowsWaiting()).isZero()));
          });
    }
  }

  @Test
  void should_deliver_kept_rows_once_they_are_inserted_again(@TempDir Path dir) throws Exception {
    AtomicBoolean accept = new AtomicBoolean();
    try (BulkReceiver receiver = new BulkReceiver()) {
      afterRejection(
          dir,
          receiver,
          accept,
          "keep",
          (runtime, ds, table) -> {
            accept.set(true);
            insertAnew(ds, table, "true");

            await()
                .atMost(TIMEOUT)
                .until(() -> TestSql.count(ds, "SELECT count(*) FROM " + table) == 0);
            List<BulkReceiver.Call> calls = receiver.calls();
            assertThat(calls).hasSize(2);
            assertThat(calls.get(1).rows())
                .extracting(r -> ((Number) r.get("contact_id")).longValue())
                .containsExactlyInAnyOrder(0L, 1L, 2L);
          });
    }
  }

  @Test
  void should_replay_only_the_kept_rows_still_in_the_table(@TempDir Path dir) throws Exception {
    AtomicBoolean accept = new AtomicBoolean();
    try (BulkReceiver receiver = new BulkReceiver()) {
      afterRejection(
          dir,
          receiver,
          accept,
          "keep",
          (runtime, ds, table) -> {
            accept.set(true);
            insertAnew(ds, table, "contact_id = 0"); // handled under a batch of its own
            await().atMost(TIMEOUT).until(() -> receiver.calls().size() == 2);
            await()
                .atMost(TIMEOUT)
                .until(() -> TestSql.count(ds, "SELECT count(*) FROM " + table) == 2);

            Cli.Result replayed =
                Cli.run("replay", "buffers", "-c", dir.resolve("spillway.yml").toString());
            assertThat(replayed.exitCode()).as(replayed.err()).isZero();
            assertThat(replayed.out()).startsWith("Replayed 1 batch (3 events) from");

            await()
                .atMost(TIMEOUT)
                .until(() -> TestSql.count(ds, "SELECT count(*) FROM " + table) == 0);
            await()
                .during(Duration.ofSeconds(2))
                .atMost(Duration.ofSeconds(10))
                .until(() -> receiver.calls().size() == 3);
            List<BulkReceiver.Call> calls = receiver.calls();
            assertThat(calls.get(1).rows())
                .extracting(r -> ((Number) r.get("contact_id")).longValue())
                .containsExactly(0L);
            assertThat(calls.get(2).idempotencyKey()).isEqualTo(calls.get(0).idempotencyKey());
            assertThat(calls.get(2).rows())
                .as("the row handled since is not handed over again")
                .extracting(r -> ((Number) r.get("contact_id")).longValue())
                .containsExactlyInAnyOrder(1L, 2L);
          });
    }
  }

  @Test
  void should_hand_a_dead_lettered_batch_over_whole_again_when_replayed(@TempDir Path dir)
      throws Exception {
    AtomicBoolean accept = new AtomicBoolean();
    try (BulkReceiver receiver = new BulkReceiver()) {
      afterRejection(
          dir,
          receiver,
          accept,
          "delete",
          (runtime, ds, table) -> {
            // A dead letter of an event that never became a batch is listed and left.
            String events = runtime.topics().bufferEvents("activity");
            try (KafkaProducer<byte[], byte[]> producer =
                new KafkaProducer<>(
                    Map.of("bootstrap.servers", runtime.bootstrapServers()),
                    new ByteArraySerializer(),
                    new ByteArraySerializer())) {
              RecordHeaders headers = new RecordHeaders();
              SinkHeaders.addFailure(
                  headers,
                  "MalformedBufferEvent",
                  "does not decode",
                  events + "-0@7",
                  System.currentTimeMillis());
              producer
                  .send(
                      new ProducerRecord<byte[], byte[]>(
                          runtime.topics().dlq(Pipeline.BUFFERS),
                          null,
                          null,
                          new byte[] {1, 2},
                          headers))
                  .get();
            }
            String config = dir.resolve("spillway.yml").toString();

            // Under a configuration without the buffer every letter is left, and it says why.
            String yaml = Files.readString(dir.resolve("spillway.yml"));
            Path none = dir.resolve("no-buffers.yml");
            Files.writeString(none, yaml.substring(0, yaml.indexOf("buffers:")));
            assertThat(Cli.run("replay", "buffers", "--dry-run", "-c", none.toString()).exitCode())
                .as("a dry run only looks")
                .isZero();
            Cli.Result elsewhere = Cli.run("replay", "buffers", "-c", none.toString());
            assertThat(elsewhere.exitCode()).as(elsewhere.err()).isEqualTo(2);
            assertThat(elsewhere.out())
                .doesNotContain("Replayed")
                .contains("Left 2 dead letters that cannot be replayed:");
            assertThat(elsewhere.err().strip())
                .endsWith(
                    "The configuration ("
                        + none
                        + ") has no buffers, so no batch can be handed back: give the one the"
                        + " batches were dead-lettered under with -c.");

            Cli.Result dry = Cli.run("replay", "buffers", "--dry-run", "-c", config);
            assertThat(dry.exitCode()).as(dry.err()).isZero();
            assertThat(dry.out())
                .contains("Would replay 1 batch (3 events) from")
                .contains("activity  3 events  -> " + runtime.topics().bufferBatches("activity"))
                .contains("Left 1 dead letter that cannot be replayed:")
                .contains("not a batch: it failed on " + events + "-0@7, before batching");

            accept.set(true);
            Cli.Result replayed =
                Cli.run("replay", "buffers", "--buffer", "activity", "-c", config);
            assertThat(replayed.exitCode()).as(replayed.err()).isZero();
            assertThat(replayed.out()).startsWith("Replayed 1 batch (3 events) from");

            await().atMost(TIMEOUT).until(() -> receiver.calls().size() >= 2);
            // Exactly once more: the dry run sent nothing.
            await()
                .during(Duration.ofSeconds(2))
                .atMost(Duration.ofSeconds(10))
                .until(() -> receiver.calls().size() == 2);
            List<BulkReceiver.Call> calls = receiver.calls();
            assertThat(calls.get(1).idempotencyKey()).isEqualTo(calls.get(0).idempotencyKey());
            assertThat(calls.get(1).rows()).isEqualTo(calls.get(0).rows());
            assertThat(calls.get(1).rows())
                .extracting(r -> ((Number) r.get("contact_id")).longValue())
                .containsExactlyInAnyOrder(0L, 1L, 2L);
            await()
                .atMost(TIMEOUT)
                .until(
                    () ->
                        StatusClient.fetch(runtime.httpPort()).buffers().get(0).handledEvents()
                            == 3);
            assertThat(
                    StatusClient.fetch(runtime.httpPort()).buffers().get(0).deadLetteredBatches())
                .isEqualTo(1);

            // Replaying again skips what the first replay handed over.
            Cli.Result again = Cli.run("replay", "buffers", "-c", config);
            assertThat(again.exitCode()).as(again.err()).isZero();
            assertThat(again.out())
                .doesNotContain("Replayed")
                .contains("Skipped 1 batch an earlier replay handed over");
            await()
                .during(Duration.ofSeconds(2))
                .atMost(Duration.ofSeconds(10))
                .until(() -> receiver.calls().size() == 2);

            // The dead letters, the only record left of those rows, and the record of their
            // replays are kept whatever the broker's default retention.
            List<ConfigResource> kept =
                Stream.of(
                        runtime.topics().dlq(Pipeline.BUFFERS),
                        runtime.topics().dlq(Pipeline.LFK),
                        runtime.topics().replays(Pipeline.BUFFERS))
                    .map(t -> new ConfigResource(ConfigResource.Type.TOPIC, t))
                    .toList();
            try (Admin admin =
                Admin.create(Map.of("bootstrap.servers", runtime.bootstrapServers()))) {
              assertThat(admin.describeConfigs(kept).all().get().values())
                  .hasSize(3)
                  .allSatisfy(
                      topic -> {
                        // Set on the topic, not the broker's default (-1 for bytes anyway).
                        for (String setting : List.of("retention.ms", "retention.bytes")) {
                          assertThat(topic.get(setting).value()).isEqualTo("-1");
                          assertThat(topic.get(setting).source())
                              .isEqualTo(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG);
                        }
                      });
            }
          });
    }
  }

  @Test
  void should_archive_from_its_events_a_replayed_batch_whose_rows_were_deleted(@TempDir Path dir)
      throws Exception {
    String columns =
        "id, note, payload, doc, at, local_at, day, amount, ratio, score, flag, span, ref, n,"
            + " small, t, tags, nums, days, odd";
    List<String> rows =
        List.of(
            "1, 'say \"hi\", (then) \\ leave', '\\x0001ff', '{\"a\": [1, \"x\"], \"b\": null}',"
                + " '2026-01-02 03:04:05.25+02', '2026-01-02 03:04:05.5', '2026-01-02', 12.50,"
                + " 0.30000000000000004, 1.1, true, '1 year 2 mons 3 days 04:05:06.5',"
                + " 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 42, -7, '24:00:00',"
                + " ARRAY['plain', 'a, b', 'say \"hi\"', 'back\\slash', '', 'null', NULL, '{x}'],"
                + " '{1,-2,NULL}', '{2026-01-02,1969-12-31,NULL}', 'NaN'",
            "2, '', '\\x', '[]', 'infinity', '-infinity', '0045-03-15 BC', -0.01, 'NaN',"
                + " '-Infinity', false, '-1 days', '00000000-0000-0000-0000-000000000000', 0, 0,"
                + " '00:00:00', '{}', '{}', '{}', 'Infinity'",
            "3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,"
                + " NULL, NULL, NULL, NULL, NULL",
            "4, E'two\\nlines, one ''quoted''', '\\x5c22', '\"text\"',"
                + " '1969-12-31 23:59:59.999999+00', '0045-03-15 12:00:00 BC', 'infinity', 1e20,"
                + " 1e-300, 3.4e38, true, '-1 year +2 days -00:00:01',"
                + " 'ffffffff-ffff-ffff-ffff-ffffffffffff', -2147483648, 32767, '23:59:59.999999', '{\"\"}', '{0}', NULL, '-Infinity'");
    AtomicBoolean accept = new AtomicBoolean();
    try (BulkReceiver receiver =
        new BulkReceiver()
            .answering(
                n -> accept.get() ? BulkReceiver.Answer.ok() : BulkReceiver.Answer.status(400))) {
      withBuffers(
          dir,
          schema ->
              String.format(
                  """
                    typed:
                      table: %1$s.typed
                      batch-size: 4
                      max-wait: 5s
                      on-exhausted: delete
                      archive-table: %1$s.typed_archive
                      handler:
                        http: { url: "%2$s" }
                  """,
                  schema, receiver.url()),
          schema ->
              List.of(
                  "CREATE TABLE "
                      + schema
                      + ".typed (id bigint PRIMARY KEY, note text, payload bytea, doc jsonb,"
                      + " at timestamptz, local_at timestamp, day date, amount numeric(30,2),"
                      + " ratio double precision, score real, flag boolean, span interval,"
                      + " ref uuid, n int, small smallint, t time, tags text[], nums int[],"
                      + " days date[], odd numeric)",
                  "CREATE TABLE " + schema + ".typed_as_inserted (LIKE " + schema + ".typed)",
                  "CREATE TABLE "
                      + schema
                      + ".typed_archive (LIKE "
                      + schema
                      + ".typed, archived_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (id))"),
          (runtime, ds, schema) -> {
            for (String row : rows) {
              // A copy of each row as inserted, to compare the archive with.
              TestSql.exec(
                  ds,
                  "WITH r AS (INSERT INTO "
                      + schema
                      + ".typed ("
                      + columns
                      + ") VALUES ("
                      + row
                      + ") RETURNING *) INSERT INTO "
                      + schema
                      + ".typed_as_inserted SELECT * FROM r");
            }
            await()
                .atMost(TIMEOUT)
                .until(
                    () ->
                        StatusClient.fetch(runtime.httpPort())
                                .buffers()
                                .get(0)
                                .deadLetteredBatches()
                            == 1);
            await()
                .atMost(TIMEOUT)
                .until(() -> TestSql.count(ds, "SELECT count(*) FROM " + schema + ".typed") == 0);
            assertThat(TestSql.count(ds, "SELECT count(*) FROM " + schema + ".typed_archive"))
                .as("rows deleted when dead-lettered are not archived; the replay archives them")
                .isZero();

            assertThat(receiver.calls().get(0).rows())
                .extracting(r -> ((Number) r.get("id")).longValue(), r -> r.get("payload"))
                .as("bytea posted as base64")
                .containsExactlyInAnyOrder(
                    org.assertj.core.groups.Tuple.tuple(1L, "AAH/"),
                    org.assertj.core.groups.Tuple.tuple(2L, ""),
                    org.assertj.core.groups.Tuple.tuple(3L, null),
                    org.assertj.core.groups.Tuple.tuple(4L, "XCI="));
            assertThat(receiver.calls().get(0).rows())
                .filteredOn(r -> ((Number) r.get("id")).longValue() == 1)
                .extracting(r -> r.get("tags"), r -> r.get("nums"))
                .as("arrays posted as PostgreSQL writes them")
                .containsExactly(
                    org.assertj.core.groups.Tuple.tuple(
                        "{plain,\"a, b\",\"say \\\"hi\\\"\",\"back\\\\slash\",\"\",\"null\",NULL,\"{x}\"}",
                        "{1,-2,NULL}"));
            assertThat(receiver.calls().get(0).rows())
                .filteredOn(r -> ((Number) r.get("id")).longValue() != 3)
                .extracting(r -> r.get("odd"))
                .as("numeric's NaN and infinities as PostgreSQL writes them")
                .containsExactlyInAnyOrder("NaN", "Infinity", "-Infinity");
            accept.set(true);
            Cli.Result replayed =
                Cli.run("replay", "buffers", "-c", dir.resolve("spillway.yml").toString());
            assertThat(replayed.exitCode()).as(replayed.err()).isZero();
            await()
                .atMost(TIMEOUT)
                .until(
                    () ->
                        StatusClient.fetch(runtime.httpPort()).buffers().get(0).handledEvents()
                            == 4);
            assertThat(TestSql.count(ds, "SELECT count(*) FROM " + schema + ".typed_archive"))
                .isEqualTo(4);
            assertThat(
                    TestSql.count(
                        ds,
                        "SELECT count(*) FROM (SELECT "
                            + columns
                            + " FROM "
                            + schema
                            + ".typed_as_inserted EXCEPT SELECT "
                            + columns
                            + " FROM "
                            + schema
                            + ".typed_archive) differing"))
                .as("every archived row equals the row as inserted")
                .isZero();

            // Handed over once more: the archive's key already holds those rows.
            Cli.Result again =
                Cli.run(
                    "replay", "buffers", "--again", "-c", dir.resolve("spillway.yml").toString());
            assertThat(again.exitCode()).as(again.err()).isZero();
            await()
                .atMost(TIMEOUT)
                .until(
                    () ->
                        StatusClient.fetch(runtime.httpPort()).buffers().get(0).handledEvents()
                            == 8);
            assertThat(receiver.calls()).hasSize(3);
            assertThat(TestSql.count(ds, "SELECT count(*) FROM " + schema + ".typed_archive"))
                .isEqualTo(4);
            assertThat(
                    StatusClient.fetch(runtime.httpPort()).buffers().get(0).deadLetteredBatches())
                .isEqualTo(1);
          });
    }
  }

  @Test
  void should_handle_rows_keyed_by_dates_and_times_and_post_them_as_iso_text(@TempDir Path dir)
      throws Exception {
    // Buffer name, its key's type, keys as inserted, the same keys as the handler must see them:
    // ISO-8601, with BC and the infinities written as PostgreSQL writes them.
    record Keys(String type, List<String> inserted, List<String> posted) {}
    Map<String, Keys> buffers =
        Map.of(
            "date",
            new Keys(
                "date",
                List.of("2026-01-02", "1969-12-31", "0045-03-15 BC", "infinity", "-infinity"),
                List.of("2026-01-02", "1969-12-31", "0045-03-15 BC", "infinity", "-infinity")),
            "timestamp",
            new Keys(
                "timestamp",
                List.of(
                    "2026-01-02 03:04:05.5",
                    "1969-12-31 23:59:59.999999",
                    "0045-03-15 12:00:00 BC",
                    "infinity",
                    "-infinity"),
                List.of(
                    "2026-01-02T03:04:05.5",
                    "1969-12-31T23:59:59.999999",
                    "0045-03-15T12:00:00 BC",
                    "infinity",
                    "-infinity")),
            "timestamp_ms",
            new Keys(
                "timestamp(3)",
                List.of(
                    "2026-01-02 03:04:05.5", "0045-03-15 12:00:00.25 BC", "infinity", "-infinity"),
                List.of(
                    "2026-01-02T03:04:05.5", "0045-03-15T12:00:00.25 BC", "infinity", "-infinity")),
            "timestamptz",
            new Keys(
                "timestamptz",
                List.of(
                    "2026-01-02 03:04:05+00",
                    "2026-01-02 03:04:06.25+00",
                    "0045-03-15 12:00:00+00 BC",
                    "10000-01-01 00:00:00+00",
                    "infinity",
                    "-infinity"),
                List.of(
                    "2026-01-02T03:04:05Z",
                    "2026-01-02T03:04:06.25Z",
                    "0045-03-15T12:00:00Z BC",
                    "10000-01-01T00:00:00Z",
                    "infinity",
                    "-infinity")),
            "time",
            new Keys("time", List.of("03:04:05.5", "24:00:00"), List.of("03:04:05.5", "24:00:00")),
            "interval",
            new Keys(
                "interval",
                List.of("1 year 2 mons 3 days 04:05:06.5", "-1 days"),
                List.of("P1Y2M3DT4H5M6.5S", "P0Y0M-1DT0H0M0S")));
    try (BulkReceiver receiver = new BulkReceiver()) {
      withBuffers(
          dir,
          schema ->
              buffers.keySet().stream()
                  .map(
                      name ->
                          String.format(
                              """
                                by_%s:
                                  table: %s.by_%s
                                  batch-size: 2
                                  max-wait: 1s
                                  handler: { http: { url: "%s" } }
                              """,
                              name, schema, name, receiver.url()))
                  .collect(Collectors.joining()),
          schema ->
              buffers.entrySet().stream()
                  .map(
                      b ->
                          "CREATE TABLE "
                              + schema
                              + ".by_"
                              + b.getKey()
                              + " (k "
                              + b.getValue().type()
                              + " PRIMARY KEY, v text)")
                  .toList(),
          (runtime, ds, schema) -> {
            buffers.forEach(
                (name, keys) ->
                    keys.inserted()
                        .forEach(
                            k ->
                                TestSql.exec(
                                    ds,
                                    "INSERT INTO "
                                        + schema
                                        + ".by_"
                                        + name
                                        + " VALUES ('"
                                        + k
                                        + "', '"
                                        + name
                                        + "')")));

            await()
                .atMost(TIMEOUT)
                .until(
                    () ->
                        TestSql.count(
                                ds,
                                buffers.keySet().stream()
                                    .map(n -> "(SELECT count(*) FROM " + schema + ".by_" + n + ")")
                                    .collect(Collectors.joining(" + ", "SELECT ", "")))
                            == 0);
            Map<Object, List<Object>> keysPosted = new HashMap<>();
            for (BulkReceiver.Call call : receiver.calls()) {
              for (Map<String, Object> row : call.rows()) {
                keysPosted.computeIfAbsent(row.get("v"), n -> new ArrayList<>()).add(row.get("k"));
              }
            }
            assertThat(keysPosted.keySet())
                .as("every buffer posted its rows")
                .containsExactlyInAnyOrderElementsOf(buffers.keySet());
            buffers.forEach(
                (name, keys) ->
                    assertThat(keysPosted.get(name))
                        .as("keys of the %s buffer as posted", name)
                        .containsExactlyInAnyOrderElementsOf(keys.posted()));
          });
    }
  }
}
