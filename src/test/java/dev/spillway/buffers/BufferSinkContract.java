package dev.spillway.buffers;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.spillway.config.ConfigException;
import dev.spillway.event.BufferBatch;
import dev.spillway.event.BufferEvent;
import dev.spillway.event.EventSerdes;
import dev.spillway.event.Pipeline;
import dev.spillway.event.TableName;
import dev.spillway.event.TopicRange;
import dev.spillway.event.Topics;
import dev.spillway.health.Health;
import dev.spillway.health.HealthGate;
import dev.spillway.health.LatencyWindow;
import dev.spillway.jdbc.Databases;
import dev.spillway.sink.BatchesTopic;
import dev.spillway.sink.Sink;
import dev.spillway.sink.SinkHeaders;
import dev.spillway.sink.SinkSettings;
import dev.spillway.testing.BulkReceiver;
import dev.spillway.testing.Infra;
import dev.spillway.testing.TestSql;
import dev.spillway.testing.TopicReader;
import dev.spillway.testing.TopicSettings;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.ByteBuffer;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import javax.sql.DataSource;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.assertj.core.api.InstanceOfAssertFactories;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Buffer batches run through a real sink against the shared embedded PostgreSQL and Kafka: the
 * handler's answers decide which rows are deleted, retried, archived or dead-lettered.
 */
abstract class BufferSinkContract {
  private static final Duration TIMEOUT = Duration.ofSeconds(60);

  /** Partitions of the batches topic, as the sink makes it. */
  private static final int PARTITIONS = 4;

  private static final String DB = "buffers";
  private static final String NAME = "events";

  private Infra infra;

  /** The real Kafka and PostgreSQL the suite runs on. */
  protected abstract Infra infra();

  private final SimpleMeterRegistry registry = new SimpleMeterRegistry();
  private Databases databases;
  private DataSource ds;
  private String schema;
  private Topics topics;
  private String batches;
  private TableName table;
  private final List<Sink> sinks = new ArrayList<>();

  /** The batch handler of the sink started last, which the pipeline closes after its sink. */
  private BufferBatchHandler batchHandler;

  @BeforeEach
  void setUp() {
    infra = infra();
    String id = UUID.randomUUID().toString().replace("-", "").substring(0, 10);
    schema = "b" + id;
    topics = new Topics("t" + id);
    batches = topics.bufferBatches(NAME);
    databases = infra.databases(DB);
    ds = databases.dataSource(DB);
    table = new TableName(schema, "contact_activity_events");
    TestSql.exec(
        ds,
        "CREATE SCHEMA " + schema,
        "CREATE TABLE "
            + table.quoted()
            + " (id bigint PRIMARY KEY, contact_id bigint NOT NULL, activity text NOT NULL)",
        "INSERT INTO "
            + table.quoted()
            + " SELECT g, 100 + g % 3, 'call' FROM generate_series(1, 100) g");
  }

  @AfterEach
  void tearDown() {
    sinks.forEach(s -> s.close(Duration.ZERO));
    TestSql.exec(ds, "DROP SCHEMA " + schema + " CASCADE");
    databases.close();
  }

  /**
   * Waits until the sink has committed {@code records} batches in all: a batch is committed once
   * its outcome, rows deleted or kept included, is done, so what the rows are then is final.
   */
  private void awaitCommitted(long records) {
    try (TopicRange range = TopicRange.open(infra.bootstrapServers(), Map.of())) {
      await()
          .atMost(TIMEOUT)
          .until(
              () ->
                  range.committed(topics.sinkGroup(Pipeline.BUFFERS)).values().stream()
                          .mapToLong(OffsetAndMetadata::offset)
                          .sum()
                      == records);
    }
  }

  private BufferSettings settings() {
    return BufferSettings.of(NAME, table, DB, new HandlerSpec.Sql("unused :ids"))
        .withAttempts(3, Duration.ofMillis(20), OnExhausted.DELETE);
  }

  /** Starts the buffer with the handler its settings name, checked as start-up checks it. */
  private Sink startAsConfigured(BufferSettings s) throws Exception {
    return start(s, BufferPipeline.handler(s, BufferPipeline.check(s, ds), ds, Clock.systemUTC()));
  }

  private Sink start(BufferSettings s, BulkHandler handler) throws Exception {
    return start(s, handler, HealthGate.ALWAYS_NORMAL);
  }

  private Sink start(BufferSettings s, BulkHandler handler, HealthGate gate) throws Exception {
    return start(s, handler, gate, ds);
  }

  /** Started on {@code data}'s connections: another role's. */
  private Sink start(BufferSettings s, BulkHandler handler, HealthGate gate, DataSource data)
      throws Exception {
    return start(s, handler, gate, data, s.maxInFlight());
  }

  /**
   * With room in the sink for {@code sinkInFlight} batches at once, the buffer's own limit aside:
   * as the workers of several consumers have together.
   */
  private Sink start(
      BufferSettings s, BulkHandler handler, HealthGate gate, DataSource data, int sinkInFlight)
      throws Exception {
    BufferTable t = BufferPipeline.check(s, data);
    RunningBuffer running =
        new RunningBuffer(s, t, handler, new BufferMetrics(registry, s.name(), () -> 0));
    Sink sink =
        Sink.start(
            Pipeline.BUFFERS,
            List.of(new BatchesTopic(batches, sinkInFlight)),
            batchHandler =
                new BufferBatchHandler(
                    Map.of(batches, running), db -> data, gate, Clock.systemUTC()),
            BufferPipeline.sinkSettings(
                SinkSettings.defaults().withRetries(2, Duration.ofMillis(20)), sinkInFlight),
            new Sink.Wiring(
                infra.bootstrapServers(),
                Map.of(),
                topics,
                PARTITIONS,
                (short) 1,
                gate,
                db -> data,
                db -> new LatencyWindow(Clock.systemUTC(), Duration.ofMinutes(1)),
                registry,
                Clock.systemUTC()));
    sinks.add(sink);
    return sink;
  }

  private static BufferBatch batch(long fromId, long toId) {
    List<BufferEvent> events = new ArrayList<>();
    long now = System.currentTimeMillis();
    for (long id = fromId; id <= toId; id++) {
      Map<String, Object> row = new LinkedHashMap<>();
      row.put("id", id);
      row.put("contact_id", 100 + id % 3);
      row.put("activity", "call");
      events.add(new BufferEvent(DB, new TableName("x", "y"), row, now * 1000, 1000 + id, now, 0));
    }
    return BufferBatch.of(NAME, events);
  }

  private void produce(BufferBatch... values) {
    produce(false, values);
  }

  /** As {@code replay buffers} hands dead-lettered batches over again. */
  private void produceReplayed(BufferBatch... values) {
    produce(true, values);
  }

  private void produce(boolean replayed, BufferBatch... values) {
    produce(replayed, false, values);
  }

  /** As {@code replay buffers} hands over a dead letter whose rows were kept in the table. */
  private void produceReplayedKept(BufferBatch... values) {
    produce(true, false, Map.of(BufferBatchHandler.ROWS, "kept"), values);
  }

  /**
   * @param spread whether to put one on each partition of the batches topic in turn, rather than
   *     where its key puts it
   */
  private void produce(boolean replayed, boolean spread, BufferBatch... values) {
    produce(replayed, spread, Map.of(), values);
  }

  /**
   * @param headers added to each record
   */
  private void produce(
      boolean replayed, boolean spread, Map<String, String> headers, BufferBatch... values) {
    Map<String, Object> p =
        Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, infra.bootstrapServers());
    try (KafkaProducer<String, byte[]> producer =
        new KafkaProducer<>(p, new StringSerializer(), new ByteArraySerializer())) {
      for (int i = 0; i < values.length; i++) {
        BufferBatch b = values[i];
        ProducerRecord<String, byte[]> r =
            new ProducerRecord<>(
                batches, spread ? i % PARTITIONS : null, b.groupId(), EventSerdes.encode(b));
        if (replayed) {
          r.headers()
              .add(
                  SinkHeaders.REPLAYED_FROM,
                  SinkHeaders.text(topics.dlq(Pipeline.BUFFERS) + "-0@7"));
        }
        headers.forEach((k, v) -> r.headers().add(k, SinkHeaders.text(v)));
        producer.send(r);
      }
      producer.flush();
    }
  }

  private long rows(long fromId, long toId) {
    return TestSql.count(
        ds,
        "SELECT count(*) FROM " + table.quoted() + " WHERE id BETWEEN " + fromId + " AND " + toId);
  }

  /** What a buffer's dead letter says of its rows: kept, deleted, or null when nothing. */
  private static String rowsSaid(ConsumerRecord<byte[], byte[]> letter) {
    Header h = letter.headers().lastHeader(BufferBatchHandler.ROWS);
    return h == null ? null : SinkHeaders.text(h.value());
  }

  /** The first dead letter, once there is one: what was left of {@code b}, just these ids. */
  private ConsumerRecord<byte[], byte[]> deadLetteredRest(BufferBatch b, Object... ids) {
    ConsumerRecord<byte[], byte[]> dead =
        TopicReader.readAtLeast(infra.bootstrapServers(), topics.dlq(Pipeline.BUFFERS), 1, TIMEOUT)
            .get(0);
    BufferBatch rest = EventSerdes.decodeBufferBatch(dead.value());
    assertThat(rest.groupId()).isEqualTo(b.groupId());
    assertThat(rest.events()).extracting(e -> e.row().get("id")).containsExactly(ids);
    return dead;
  }

  /** Waits for the dead-lettered batches counter to reach 1, then checks the events counter. */
  private void assertOneBatchDeadLetteredWith(double events, String why) {
    await()
        .atMost(TIMEOUT)
        .until(() -> registry.get("spillway_buffer_dead_lettered_batches").counter().count() == 1);
    assertThat(registry.get("spillway_buffer_dead_lettered_events").counter().count())
        .as(why)
        .isEqualTo(events);
  }

  /** An archive table of the buffer's columns, {@code idConstraint} added to its primary key. */
  private TableName archiveTable(String idConstraint) {
    TableName archive = new TableName(schema, "contact_activity_archive");
    TestSql.exec(
        ds,
        "CREATE TABLE "
            + archive.quoted()
            + " (id bigint PRIMARY KEY "
            + idConstraint
            + ", contact_id bigint, activity text)");
    return archive;
  }

  /** Records what a handler was given. */
  private record Seen(String groupId, int attempt, List<Object> ids) {}

  /**
   * A handler noting every call in {@code seen}: of a call {@code evenOnly} picks it handles only
   * the even ids, of any other all of them.
   */
  private static BulkHandler evenIdsWhen(
      List<Seen> seen, java.util.function.Predicate<BulkHandler.Batch> evenOnly) {
    return b -> {
      seen.add(new Seen(b.groupId(), b.attempt(), b.ids()));
      if (!evenOnly.test(b)) {
        return BulkHandler.Result.success();
      }
      Set<Object> even = new HashSet<>();
      b.ids().stream().filter(id -> ((Long) id) % 2 == 0).forEach(even::add);
      return BulkHandler.Result.partial(even, "odd ids refused for now");
    };
  }

  @Test
  void should_delete_only_what_succeeded_and_retry_only_the_rest() throws Exception {
    List<Seen> seen = new CopyOnWriteArrayList<>();
    start(settings(), evenIdsWhen(seen, b -> b.attempt() == 1));
    BufferBatch b = batch(1, 10);
    produce(b);

    await().atMost(TIMEOUT).until(() -> rows(1, 10) == 0);
    assertThat(seen).hasSize(2);
    assertThat(seen.get(0).ids()).hasSize(10);
    assertThat(seen.get(1).ids()).containsExactly(1L, 3L, 5L, 7L, 9L);
    assertThat(seen).allMatch(s -> s.groupId().equals(b.groupId()));
    assertThat(rows(11, 100)).as("rows of no batch stay").isEqualTo(90);
  }

  @Test
  void should_delete_rows_keyed_by_bytea_whose_text_differs_from_java() throws Exception {
    List<Object> keys = List.of(new byte[] {1}, new byte[] {2, 3}, new byte[] {(byte) 0xff});
    assertKeyedRowsHandled("bytea", "decode(k, 'hex')", List.of("01", "0203", "ff"), keys);
  }

  @Test
  void should_match_a_partial_answer_naming_bytea_ids_by_their_bytes() throws Exception {
    List<Object> keys = List.of(new byte[] {1}, new byte[] {2, 3});
    List<Integer> calls = new CopyOnWriteArrayList<>();
    BulkHandler copiesFirst =
        b -> {
          calls.add(b.ids().size());
          if (b.attempt() > 1) {
            return BulkHandler.Result.success();
          }
          // Equal bytes in new arrays, as a handler that parsed them from a response would have.
          Set<Object> first = new HashSet<>(List.of(((byte[]) b.ids().get(0)).clone()));
          return BulkHandler.Result.partial(first, "second refused for now");
        };
    assertKeyedRowsHandled("bytea", "decode(k, 'hex')", List.of("01", "0203"), keys, copiesFirst);
    assertThat(calls).as("only the refused row was called again").containsExactly(2, 1);
  }

  @Test
  void should_pass_bytea_ids_to_the_sql_handler_as_an_array() throws Exception {
    TableName copied = new TableName(schema, "copied_keys");
    TestSql.exec(ds, "CREATE TABLE " + copied.quoted() + " (k bytea PRIMARY KEY)");
    BulkHandler sql =
        new SqlBulkHandler(
            ds,
            "INSERT INTO " + copied.quoted() + " SELECT unnest(CAST(:ids AS bytea[]))",
            "bytea",
            Duration.ZERO);
    List<Object> keys = List.of(new byte[] {1}, new byte[] {2, 3});
    assertKeyedRowsHandled("bytea", "decode(k, 'hex')", List.of("01", "0203"), keys, sql);
    assertThat(
            TestSql.text(
                ds, "SELECT string_agg(encode(k, 'hex'), ',' ORDER BY k) FROM " + copied.quoted()))
        .as("the keys the statement received")
        .isEqualTo("01,0203");
  }

  @Test
  void should_delete_rows_keyed_by_floating_point_whose_text_differs_from_java() throws Exception {
    // PostgreSQL writes these as 1e+20 and 1e-07, Java as 1.0E20 and 1.0E-7.
    List<Object> keys = List.of(1e20, 1e-7, 2.5);
    assertKeyedRowsHandled(
        "double precision", "k::double precision", List.of("1e20", "1e-7", "2.5"), keys);
  }

  @Test
  void should_delete_rows_keyed_by_a_domain_of_a_schema_off_the_search_path() throws Exception {
    // The test's schema is not on the role's search_path, and the name needs quoting.
    TestSql.exec(ds, "CREATE DOMAIN " + schema + ".\"EventId\" AS bigint CHECK (VALUE > 0)");
    assertKeyedRowsHandled(
        schema + ".\"EventId\"", "k::bigint", List.of("1", "2", "3"), List.of(1L, 2L, 3L));
  }

  @Test
  void should_delete_rows_keyed_by_a_domain_over_bytea() throws Exception {
    TestSql.exec(ds, "CREATE DOMAIN " + schema + ".\"Digest\" AS bytea");
    List<Object> keys = List.of(new byte[] {1}, new byte[] {2, 3});
    assertKeyedRowsHandled(schema + ".\"Digest\"", "decode(k, 'hex')", List.of("01", "0203"), keys);
  }

  /** A buffer table keyed by {@code type}: every row of a batch naming its keys is handled. */
  private void assertKeyedRowsHandled(
      String type, String fromText, List<String> texts, List<Object> keys) throws Exception {
    AtomicInteger handled = new AtomicInteger();
    assertKeyedRowsHandled(
        type,
        fromText,
        texts,
        keys,
        b -> {
          handled.addAndGet(b.ids().size());
          return BulkHandler.Result.success();
        });
    assertThat(handled.get()).as("every event reached the handler once").isEqualTo(keys.size());
  }

  private void assertKeyedRowsHandled(
      String type, String fromText, List<String> texts, List<Object> keys, BulkHandler handler)
      throws Exception {
    TableName keyed = new TableName(schema, "keyed_events");
    TestSql.exec(
        ds,
        "CREATE TABLE " + keyed.quoted() + " (k " + type + " PRIMARY KEY, activity text)",
        "INSERT INTO "
            + keyed.quoted()
            + " SELECT "
            + fromText
            + ", 'call' FROM unnest(ARRAY['"
            + String.join("','", texts)
            + "']) k");
    List<BufferEvent> events = new ArrayList<>();
    for (Object key : keys) {
      Map<String, Object> row = new LinkedHashMap<>();
      row.put("k", key);
      row.put("activity", "call");
      events.add(new BufferEvent(DB, keyed, row, 0, 1, System.currentTimeMillis(), 0));
    }
    start(
        BufferSettings.of(NAME, keyed, DB, new HandlerSpec.Sql("unused :ids"))
            .withAttempts(3, Duration.ofMillis(20), OnExhausted.KEEP),
        handler);
    produce(BufferBatch.of(NAME, events));

    await()
        .atMost(TIMEOUT)
        .until(() -> TestSql.count(ds, "SELECT count(*) FROM " + keyed.quoted()) == 0);
  }

  /** What the event of a row not yet visible says of its inserting transaction. */
  enum Inserter {
    KNOWN,
    /** Captured by an earlier version. */
    UNKNOWN,
    /** The same, in a batch whose other missing row's event names its (ended) transaction. */
    UNKNOWN_BESIDE_A_KNOWN_ONE
  }

  @ParameterizedTest
  @EnumSource(Inserter.class)
  void should_wait_for_a_row_whose_inserting_transaction_is_not_yet_visible(Inserter inserter)
      throws Exception {
    // Capture can read a commit before the transaction is visible to other sessions; a transaction
    // kept open stands in for that gap, long enough to be seen.
    List<Object> seen = new CopyOnWriteArrayList<>();
    start(settings(), recording(seen));
    try (Connection late = insertingRow101()) {
      BufferBatch b =
          switch (inserter) {
            case KNOWN -> withTransaction(batch(100, 101), 101, xid(late));
            case UNKNOWN -> batch(100, 101);
            case UNKNOWN_BESIDE_A_KNOWN_ONE ->
                // Row 102 was deleted; its transaction ended long ago.
                withTransaction(
                    batch(100, 102),
                    102,
                    Long.parseLong(TestSql.text(ds, "SELECT pg_current_xact_id()::xid::text")));
          };
      produce(b);
      awaitVisibilityWait();
      assertThat(seen).as("nothing handled while row 101 is not visible").isEmpty();
      late.commit();
    }

    await().atMost(TIMEOUT).until(() -> rows(100, 101) == 0);
    assertThat(seen).containsExactlyInAnyOrder(100L, 101L);
  }

  @Test
  void should_pause_not_requeue_a_batch_whose_worker_stops_during_the_visibility_wait()
      throws Exception {
    List<Object> seen = new CopyOnWriteArrayList<>();
    Sink sink = start(settings(), recording(seen));
    try (Connection late = insertingRow101()) {
      produce(batch(100, 101));
      awaitVisibilityWait();
      sinks.remove(sink);
      sink.close(Duration.ofSeconds(60));
      late.rollback();
    }
    assertThat(seen).as("the handler was not called").isEmpty();
    assertThat(sink.metrics().requeuedCount()).as("paused, not put back").isZero();
    assertThat(rows(100, 100)).isEqualTo(1);

    // Paused, not dropped either: the next worker runs the batch (row 101 was never committed).
    start(settings(), recording(seen));
    await().atMost(TIMEOUT).until(() -> rows(100, 100) == 0);
    assertThat(seen).containsExactly(100L);
  }

  @Test
  void should_not_wait_on_other_transactions_for_rows_deleted_before_their_batch_ran()
      throws Exception {
    // Rows 201 and 202 were inserted by one transaction, 203 was read by a snapshot; the
    // application deleted 202 and 203 before the batch ran. Another transaction, open throughout,
    // inserted nothing the batch holds: the batch does not wait for it.
    String xid =
        TestSql.text(
            ds,
            "WITH i AS (INSERT INTO "
                + table.quoted()
                + " SELECT g, 7, 'call' FROM generate_series(201, 203) g RETURNING id)"
                + " SELECT DISTINCT pg_current_xact_id()::xid::text FROM i");
    List<BufferEvent> events = new ArrayList<>();
    for (BufferEvent e : batch(201, 203).events()) {
      long id = (Long) e.row().get("id");
      events.add(
          id == 203
              ? copy(e, e.row(), -203, 0) // a snapshot's read
              : copy(e, e.row(), e.lsn(), Long.parseLong(xid)));
    }
    TestSql.exec(ds, "DELETE FROM " + table.quoted() + " WHERE id IN (202, 203)");
    List<Object> seen = new CopyOnWriteArrayList<>();
    start(settings(), recording(seen));
    try (Connection other = insertingRow101()) {
      produce(BufferBatch.of(NAME, events));

      await().atMost(TIMEOUT).until(() -> rows(201, 201) == 0);
      assertThat(seen).containsExactly(201L);
      other.rollback();
    }
  }

  @Test
  void should_hand_over_the_newer_of_two_inserts_of_one_key_in_a_batch() throws Exception {
    // The application replaced row 301 (DELETE, then INSERT under the same key) before its batch
    // ran: both inserts are in the batch, and the table holds the second.
    TestSql.exec(ds, "INSERT INTO " + table.quoted() + " VALUES (301, 7, 'email')");
    BufferEvent first = batch(301, 301).events().get(0);
    Map<String, Object> replaced = new LinkedHashMap<>(first.row());
    replaced.put("activity", "email");
    BufferEvent second = copy(first, replaced, first.lsn() + 1, 0);
    List<Object> activities = new CopyOnWriteArrayList<>();
    start(
        settings(),
        b -> {
          b.rows().forEach(r -> activities.add(r.get("activity")));
          return BulkHandler.Result.success();
        });

    produce(BufferBatch.of(NAME, List.of(first, second)));

    await().atMost(TIMEOUT).until(() -> rows(301, 301) == 0);
    assertThat(activities).as("the row the table held, deleted after").containsExactly("email");
  }

  /** {@code b} with the event of row {@code id} inserted by transaction {@code xid}. */
  private static BufferBatch withTransaction(BufferBatch b, long id, long xid) {
    List<BufferEvent> events = new ArrayList<>();
    for (BufferEvent e : b.events()) {
      events.add(e.row().get("id").equals(id) ? copy(e, e.row(), e.lsn(), xid) : e);
    }
    return BufferBatch.of(b.buffer(), events);
  }

  /** {@code e} with another row, position and inserting transaction. */
  private static BufferEvent copy(BufferEvent e, Map<String, Object> row, long lsn, long xid) {
    return new BufferEvent(
        e.database(), e.table(), row, e.commitTimeMicros(), lsn, e.capturedAtMillis(), xid);
  }

  /** The id of the transaction open on {@code c}, as capture reads it. */
  private static long xid(Connection c) throws SQLException {
    try (Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("SELECT pg_current_xact_id()::xid::text")) {
      rs.next();
      return Long.parseLong(rs.getString(1));
    }
  }

  /** A handler that succeeds, noting the group id of every batch it is given. */
  private static BulkHandler recordingGroups(List<String> groups) {
    return b -> {
      groups.add(b.groupId());
      return BulkHandler.Result.success();
    };
  }

  /** A handler that succeeds, noting every id it is given. */
  private static BulkHandler recording(List<Object> seen) {
    return b -> {
      seen.addAll(b.ids());
      return BulkHandler.Result.success();
    };
  }

  /**
   * A connection whose open transaction has inserted row 101: capture could have read such a row's
   * commit while other sessions cannot see it yet.
   */
  private Connection insertingRow101() throws SQLException {
    return TestSql.inTransaction(ds, "INSERT INTO " + table.quoted() + " VALUES (101, 7, 'call')");
  }

  /** Waits until a run is waiting for the transactions running when it looked its rows up. */
  private void awaitVisibilityWait() {
    // Asked again and again while it waits; asked since now, so an earlier test's pooled session
    // whose last statement was such a look does not pass for it.
    String since = TestSql.text(ds, "SELECT clock_timestamp()::text");
    await()
        .atMost(TIMEOUT)
        .until(
            () ->
                TestSql.count(
                        ds,
                        "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%FROM pg_locks%'"
                            + " AND query_start > '"
                            + since
                            + "'::timestamptz AND pid <> pg_backend_pid()")
                    > 0);
  }

  @Test
  void should_refuse_a_buffer_table_it_cannot_match_rows_of_before_starting() throws Exception {
    TestSql.exec(
        ds,
        "CREATE TABLE " + schema + ".no_key (a bigint)",
        "CREATE TABLE " + schema + ".two_keys (a bigint, b bigint, PRIMARY KEY (a, b))",
        "CREATE TABLE " + schema + ".thin_archive (id bigint)",
        "CREATE TABLE "
            + schema
            + ".odd_archive (id bigint, contact_id bigint, activity jsonb, at timestamptz)",
        "CREATE TABLE " + schema + ".array_key (id int[] PRIMARY KEY)",
        "CREATE DOMAIN " + schema + ".code AS int",
        "CREATE TABLE " + schema + ".code_array_key (id " + schema + ".code[] PRIMARY KEY)",
        "CREATE TABLE " + schema + ".zoned_key (id timetz PRIMARY KEY, note text)",
        "CREATE TYPE " + schema + ".pair AS (a int, b text)",
        "CREATE DOMAIN " + schema + ".span AS interval",
        "CREATE DOMAIN " + schema + ".spot AS point",
        "CREATE DOMAIN " + schema + ".place AS " + schema + ".spot",
        "CREATE EXTENSION IF NOT EXISTS hstore SCHEMA public",
        "CREATE TABLE " + schema + ".hstore_key (id public.hstore PRIMARY KEY)",
        "CREATE TABLE " + schema + ".hstore_attrs (id bigint PRIMARY KEY, attrs public.hstore[])",
        "CREATE TABLE " + schema + ".hstore_archive (LIKE " + schema + ".hstore_attrs)",
        "CREATE TABLE "
            + schema
            + ".odd_columns (id bigint PRIMARY KEY, at point, note text, p "
            + schema
            + ".pair, spans int4multirange, flags bit(3), waits interval[], tags text[], costs"
            + " money[], docs xml[], pairs "
            + schema
            + ".pair[], holds "
            + schema
            + ".span[], days date[], at_place "
            + schema
            + ".place)");
    assertThat(refusal(new TableName(schema, "odd_columns")))
        .contains(
            "names table "
                + schema
                + ".odd_columns, whose column(s) at (point), p ("
                + schema
                + ".pair), spans (int4multirange), flags (bit(3)), waits (interval[]), costs"
                + " (money[]), docs (xml[]), pairs ("
                + schema
                + ".pair[]), holds ("
                + schema
                + ".span[]), at_place ("
                + schema
                + ".place) capture cannot pass on as values"
                + " PostgreSQL reads back (they would reach the handler missing or garbled); store"
                + " them as text, or keep them out of the buffer table.");
    assertThat(refusal(new TableName(schema, "array_key")))
        .contains(
            "buffers."
                + NAME
                + " names table "
                + schema
                + ".array_key, whose primary key id is of type int4[], which cannot be passed as"
                + " an array parameter (")
        .endsWith("); key the buffer by a column of a scalar type.");
    assertThat(refusal(new TableName(schema, "code_array_key")))
        .contains(
            ".code_array_key, whose primary key id is of type "
                + schema
                + ".code[], which cannot be passed as an array parameter (");
    assertThat(refusal(new TableName(schema, "zoned_key")))
        .contains(
            "names table "
                + schema
                + ".zoned_key, whose primary key id is of type time with time zone, which capture"
                + " passes on turned to UTC and so cannot be looked up again; key the buffer by a"
                + " column of another type.");
    assertThat(refusal(new TableName(schema, "hstore_key")))
        .endsWith(
            ".hstore_key, whose primary key id is of type hstore, which capture passes on as JSON,"
                + " which hstore does not read, and so cannot be looked up again; key the buffer by"
                + " a column of another type.");
    TableName attrs = new TableName(schema, "hstore_attrs");
    BufferSettings hstore = BufferSettings.of(NAME, attrs, DB, new HandlerSpec.Sql("unused :ids"));
    assertThat(BufferPipeline.check(hstore, ds).idColumn())
        .as("handed over as JSON")
        .isEqualTo("id");
    assertThatThrownBy(
            () ->
                BufferPipeline.check(
                    hstore.withArchive(new TableName(schema, "hstore_archive")), ds))
        .isInstanceOf(ConfigException.class)
        .hasMessageEndingWith(
            " has archive-table "
                + schema
                + ".hstore_archive, but capture passes column(s) attrs (hstore[]) of "
                + schema
                + ".hstore_attrs on as JSON, which their type does not read, so a replayed"
                + " batch's rows could not be archived from its events; store them as text, or"
                + " leave archive-table out.");
    assertThat(
            BufferPipeline.check(
                    hstore
                        .withArchive(new TableName(schema, "hstore_archive"))
                        .withAttempts(3, Duration.ofMillis(20), OnExhausted.KEEP),
                    ds)
                .idColumn())
        .as("rows kept at dead-lettering: a replay archives them from the table")
        .isEqualTo("id");
    assertThat(refusal(new TableName(schema, "nope")))
        .endsWith("names table " + schema + ".nope, which does not exist in database " + DB + ".");
    assertThat(refusal(new TableName(schema, "no_key")))
        .endsWith("which has no single-column primary key to delete handled rows by.");
    assertThat(refusal(new TableName(schema, "two_keys")))
        .endsWith("which has no single-column primary key to delete handled rows by.");
    assertThatThrownBy(
            () ->
                BufferPipeline.check(
                    settings().withArchive(new TableName(schema, "thin_archive")), ds))
        .hasMessageEndingWith("which lacks the buffer's column(s) contact_id, activity.");
    assertThatThrownBy(
            () ->
                BufferPipeline.check(
                    settings().withArchive(new TableName(schema, "odd_archive")), ds))
        .isInstanceOf(ConfigException.class)
        .hasMessageEndingWith(
            "buffers."
                + NAME
                + " has archive-table "
                + schema
                + ".odd_archive, which PostgreSQL refuses to copy the buffer's rows into: column"
                + " \"activity\" is of type jsonb but expression is of type text.");
  }

  private String refusal(TableName t) {
    return assertThrows(
            ConfigException.class,
            () ->
                BufferPipeline.check(
                    BufferSettings.of(NAME, t, DB, new HandlerSpec.Sql("unused :ids")), ds))
        .getMessage();
  }

  @Test
  void should_refuse_a_buffer_or_archive_table_whose_row_security_applies_to_its_role()
      throws Exception {
    TableName archive = new TableName(schema, "archived");
    TestSql.exec(ds, "CREATE TABLE " + archive.quoted() + " (LIKE " + table.quoted() + ")");
    BufferSettings s =
        BufferSettings.of(NAME, table, DB, new HandlerSpec.Sql("unused :ids")).withArchive(archive);
    try (Role role = new Role("SELECT, DELETE", "INSERT")) {
      assertThat(BufferPipeline.check(s, role.ds).idColumn())
          .as("no row security yet")
          .isEqualTo("id");

      TestSql.exec(ds, "ALTER TABLE " + archive.quoted() + " ENABLE ROW LEVEL SECURITY");
      assertThat(assertThrows(ConfigException.class, () -> BufferPipeline.check(s, role.ds)))
          .hasMessageEndingWith(
              "buffers.events has archive-table "
                  + archive.displayName()
                  + ", whose row-level security applies to Spillway's role, so the buffer's"
                  + " statements would fail on it (they do not let a policy hide rows, which"
                  + " would look handled); make the role the table's owner (without FORCE ROW"
                  + " LEVEL SECURITY) or give it BYPASSRLS.");

      TestSql.exec(ds, "ALTER TABLE " + table.quoted() + " ENABLE ROW LEVEL SECURITY");
      assertThat(assertThrows(ConfigException.class, () -> BufferPipeline.check(s, role.ds)))
          .hasMessageContaining(
              "buffers.events names table "
                  + table.displayName()
                  + ", whose row-level security applies to Spillway's role");
      assertThat(BufferPipeline.check(s, ds).idColumn())
          .as("a role row security does not apply to, as a superuser")
          .isEqualTo("id");
    }
  }

  @Test
  void should_dead_letter_not_pass_over_a_batch_whose_rows_a_policy_hides() throws Exception {
    try (Role role = new Role("SELECT, DELETE", null)) {
      List<String> called = new CopyOnWriteArrayList<>();
      start(settings(), recordingGroups(called), HealthGate.ALWAYS_NORMAL, role.ds);
      // Row security comes after start-up's check: a policy that lets the role see no row.
      TestSql.exec(
          ds,
          "ALTER TABLE " + table.quoted() + " ENABLE ROW LEVEL SECURITY",
          "CREATE POLICY none_seen ON " + table.quoted() + " USING (false)");
      produce(batch(1, 3));

      assertDeadLetteredForRowSecurityWithRowsKept();
      assertThat(called).as("the handler was not called").isEmpty();
    }
  }

  /**
   * Events of a buffer since moved to another database, still in Kafka, name rows of the other
   * database's table by their ids: a batch of them alone, and one where the first events captured
   * from the buffer's database now joined the last of the old one.
   */
  @Test
  void should_dead_letter_with_rows_kept_the_events_captured_from_another_database()
      throws Exception {
    List<Object> seen = new CopyOnWriteArrayList<>();
    start(settings(), recording(seen));
    produce(BufferBatch.of(NAME, capturedFrom("crm", batch(1, 3).events())));

    ConsumerRecord<byte[], byte[]> dead =
        TopicReader.readAtLeast(infra.bootstrapServers(), topics.dlq(Pipeline.BUFFERS), 1, TIMEOUT)
            .get(0);
    assertThat(SinkHeaders.text(dead.headers().lastHeader(SinkHeaders.ERROR_MESSAGE).value()))
        .contains("batch of rows captured from database crm, but buffer " + NAME)
        .contains("now works on database " + DB);
    awaitCommitted(1);
    assertThat(seen).as("the handler was not called").isEmpty();
    assertThat(rows(1, 3)).as("rows of this database with those ids left alone").isEqualTo(3);

    List<BufferEvent> mixed = new ArrayList<>(capturedFrom("crm", batch(4, 5).events()));
    mixed.addAll(batch(6, 8).events());
    produce(BufferBatch.of(NAME, mixed));

    await().atMost(TIMEOUT).until(() -> rows(6, 8) == 0);
    List<ConsumerRecord<byte[], byte[]>> letters =
        TopicReader.readAtLeast(infra.bootstrapServers(), topics.dlq(Pipeline.BUFFERS), 2, TIMEOUT);
    assertThat(letters)
        .flatExtracting(r -> EventSerdes.decodeBufferBatch(r.value()).events())
        .as("only the other database's events dead-lettered")
        .extracting(e -> e.row().get("id"))
        .containsExactlyInAnyOrder(1L, 2L, 3L, 4L, 5L);
    assertThat(seen).containsExactlyInAnyOrder(6L, 7L, 8L);
    assertThat(rows(4, 5)).isEqualTo(2);
  }

  /**
   * Events captured before the table's key column was renamed carry no id to look their rows up by:
   * counted as deleted since, their rows were never handed over. They go to the dead letters with
   * their rows kept, and events captured since in the same batch run.
   */
  @Test
  void should_dead_letter_with_rows_kept_the_events_captured_before_the_key_was_renamed()
      throws Exception {
    TestSql.exec(ds, "ALTER TABLE " + table.quoted() + " RENAME COLUMN id TO activity_id");
    List<Object> seen = new CopyOnWriteArrayList<>();
    start(settings(), recording(seen));
    List<BufferEvent> events = new ArrayList<>(batch(1, 3).events());
    for (BufferEvent e : batch(4, 5).events()) {
      Map<String, Object> row = new LinkedHashMap<>();
      e.row()
          .forEach((column, value) -> row.put(column.equals("id") ? "activity_id" : column, value));
      events.add(
          new BufferEvent(
              e.database(),
              e.table(),
              row,
              e.commitTimeMicros(),
              e.lsn(),
              e.capturedAtMillis(),
              e.txId()));
    }
    produce(BufferBatch.of(NAME, events));

    ConsumerRecord<byte[], byte[]> dead =
        TopicReader.readAtLeast(infra.bootstrapServers(), topics.dlq(Pipeline.BUFFERS), 1, TIMEOUT)
            .get(0);
    assertThat(SinkHeaders.text(dead.headers().lastHeader(SinkHeaders.ERROR_MESSAGE).value()))
        .isEqualTo(
            "batch of rows captured without column activity_id, the key of "
                + table
                + " (renamed since? they carry id, contact_id, activity): their rows are left in"
                + " the table, and `bin/spillway buffers reread "
                + NAME
                + "` hands them over");
    assertThat(rowsSaid(dead)).isEqualTo("kept");
    assertThat(EventSerdes.decodeBufferBatch(dead.value()).events())
        .extracting(e -> e.row().get("id"))
        .containsExactly(1L, 2L, 3L);
    await().atMost(TIMEOUT).until(() -> seen.size() == 2);
    assertThat(seen).as("the events captured since handed over").containsExactly(4L, 5L);
    assertThat(
            TestSql.count(
                ds,
                "SELECT count(*) FROM " + table.quoted() + " WHERE activity_id BETWEEN 1 AND 5"))
        .as("rows 1 to 3 left, 4 and 5 deleted once handled")
        .isEqualTo(3);
  }

  /**
   * A batch of this database's events and the other database's whose handler gives up on its own
   * part: one letter holds both, says why each is there, counts every event, and keeps every row,
   * since the other database's were never touched and a letter says one fate for all.
   */
  @Test
  void should_keep_the_rows_of_a_letter_holding_another_databases_events_beside_exhausted_ones()
      throws Exception {
    start(
        settings().withAttempts(1, Duration.ofMillis(10), OnExhausted.DELETE),
        b -> BulkHandler.Result.reject("400 Bad Request"));
    List<BufferEvent> mixed = new ArrayList<>(capturedFrom("crm", batch(1, 2).events()));
    mixed.addAll(batch(3, 5).events());
    produce(BufferBatch.of(NAME, mixed));

    ConsumerRecord<byte[], byte[]> dead =
        TopicReader.readAtLeast(infra.bootstrapServers(), topics.dlq(Pipeline.BUFFERS), 1, TIMEOUT)
            .get(0);
    assertThat(EventSerdes.decodeBufferBatch(dead.value()).events())
        .extracting(e -> e.row().get("id"))
        .containsExactlyInAnyOrder(1L, 2L, 3L, 4L, 5L);
    assertThat(SinkHeaders.text(dead.headers().lastHeader(SinkHeaders.ERROR_MESSAGE).value()))
        .contains("400 Bad Request")
        .contains("with 2 event(s) of a batch of rows captured from database crm");
    assertThat(rowsSaid(dead)).isEqualTo("kept");
    assertOneBatchDeadLetteredWith(5, "every event of the letter");
    await()
        .during(Duration.ofSeconds(1))
        .atMost(TIMEOUT)
        .alias("this database's rows kept for the replay")
        .until(() -> rows(3, 5) == 3);
  }

  private static List<BufferEvent> capturedFrom(String database, List<BufferEvent> events) {
    return events.stream()
        .map(
            e ->
                new BufferEvent(
                    database,
                    e.table(),
                    e.row(),
                    e.commitTimeMicros(),
                    e.lsn(),
                    e.capturedAtMillis(),
                    e.txId()))
        .toList();
  }

  @Test
  void should_dead_letter_not_count_done_a_batch_whose_rows_a_policy_keeps_it_from_deleting()
      throws Exception {
    policyArrivingDuringTheCall(settings(), null);
  }

  @Test
  void should_dead_letter_not_count_done_a_batch_a_policy_keeps_from_its_archive()
      throws Exception {
    TableName archive = new TableName(schema, "archived");
    TestSql.exec(ds, "CREATE TABLE " + archive.quoted() + " (LIKE " + table.quoted() + ")");
    policyArrivingDuringTheCall(settings().withArchive(archive), "INSERT");
  }

  /**
   * Row security arrives while the handler is called, with a policy that lets the role read the
   * rows but not delete them: the deletion after the call must fail, not delete none and count the
   * batch done.
   */
  private void policyArrivingDuringTheCall(BufferSettings s, String archiveRights)
      throws Exception {
    try (Role role = new Role("SELECT, DELETE", archiveRights)) {
      AtomicInteger calls = new AtomicInteger();
      start(
          s,
          batch -> {
            calls.incrementAndGet();
            TestSql.exec(
                ds,
                "DROP POLICY IF EXISTS reads_only ON " + table.quoted(),
                "ALTER TABLE " + table.quoted() + " ENABLE ROW LEVEL SECURITY",
                "CREATE POLICY reads_only ON " + table.quoted() + " FOR SELECT USING (true)");
            return BulkHandler.Result.success();
          },
          HealthGate.ALWAYS_NORMAL,
          role.ds);
      produce(batch(1, 3));

      assertDeadLetteredForRowSecurityWithRowsKept();
      assertThat(calls).hasValue(1);
    }
  }

  /** Batch 1–3 went to the dead letters for row security, its rows kept for a replay. */
  private void assertDeadLetteredForRowSecurityWithRowsKept() {
    ConsumerRecord<byte[], byte[]> dead =
        TopicReader.readAtLeast(infra.bootstrapServers(), topics.dlq(Pipeline.BUFFERS), 1, TIMEOUT)
            .get(0);
    assertThat(SinkHeaders.text(dead.headers().lastHeader(SinkHeaders.ERROR_MESSAGE).value()))
        .contains("row-level security");
    assertThat(rows(1, 3)).as("the rows stay for a replay once mended").isEqualTo(3);
  }

  /**
   * A role of its own with {@code rights} on the buffer table and {@code archiveRights} on its
   * archive table (none when null), and a pool of its connections; dropped when closed.
   */
  private final class Role implements AutoCloseable {
    final String name = schema + "_role";
    final Databases databases;
    final DataSource ds;

    Role(String rights, String archiveRights) {
      TestSql.exec(BufferSinkContract.this.ds, "CREATE ROLE " + name + " LOGIN PASSWORD 'pw'");
      try {
        TestSql.exec(
            BufferSinkContract.this.ds,
            "GRANT USAGE ON SCHEMA " + schema + " TO " + name,
            "GRANT " + rights + " ON " + table.quoted() + " TO " + name);
        if (archiveRights != null) {
          TestSql.exec(
              BufferSinkContract.this.ds,
              "GRANT " + archiveRights + " ON " + schema + ".archived TO " + name);
        }
        databases = TestSql.databasesAs(infra.database(DB), DB, name);
      } catch (RuntimeException e) {
        drop();
        throw e;
      }
      ds = databases.dataSource(DB);
    }

    private void drop() {
      TestSql.exec(BufferSinkContract.this.ds, "DROP OWNED BY " + name, "DROP ROLE " + name);
    }

    @Override
    public void close() {
      sinks.forEach(s -> s.close(Duration.ZERO));
      sinks.clear();
      databases.close();
      drop();
    }
  }

  @Test
  void should_count_rows_waiting_exactly_up_to_the_limit_and_estimate_above_it() throws Exception {
    try (Connection c = ds.getConnection()) {
      assertThat(BufferStatements.rowsWaiting(c, table)).isEqualTo(100);
      // The estimate, taken at 250,000 rows, stays there while 100,000 rows go: the table is
      // not counted once past the limit.
      TestSql.exec(
          ds,
          "ALTER TABLE " + table.quoted() + " SET (autovacuum_enabled = false)",
          "INSERT INTO "
              + table.quoted()
              + " SELECT g, 1, 'call' FROM generate_series(101, 250000) g",
          "ANALYZE " + table.quoted(),
          "DELETE FROM " + table.quoted() + " WHERE id > 150000");
      assertThat(BufferStatements.rowsWaiting(c, table))
          .as("the planner's estimate once past the limit")
          .isCloseTo(250_000L, within(25_000L));
    }
  }

  /**
   * Waits for the handled counter, counted just after the delete commits, on the worker's thread.
   */
  private void awaitHandled(long events) {
    await()
        .atMost(TIMEOUT)
        .untilAsserted(
            () ->
                assertThat(registry.get("spillway_buffer_events_handled").counter().count())
                    .isEqualTo(events));
  }

  @Test
  void should_retry_a_failed_batch_and_delete_its_rows_once_it_succeeds() throws Exception {
    AtomicInteger calls = new AtomicInteger();
    BulkHandler flaky =
        b ->
            calls.incrementAndGet() < 3
                ? BulkHandler.Result.retry("service unavailable")
                : BulkHandler.Result.success();
    Sink sink = start(settings(), flaky);
    produce(batch(1, 5));

    await().atMost(TIMEOUT).until(() -> rows(1, 5) == 0);
    assertThat(calls.get()).isEqualTo(3);
    assertThat(sink.metrics().deadLetteredCount()).isZero();
    awaitHandled(5);
  }

  @Test
  void should_give_the_handler_a_row_captured_twice_in_one_batch_once() throws Exception {
    List<Object> seen = new CopyOnWriteArrayList<>();
    start(settings(), recording(seen));
    // A row inserted while a snapshot reads its table comes as an insert and as a read.
    List<BufferEvent> events = new ArrayList<>(batch(1, 3).events());
    events.add(2, events.get(1));
    produce(BufferBatch.of(NAME, events));

    await().atMost(TIMEOUT).until(() -> rows(1, 3) == 0);
    assertThat(seen).containsExactly(1L, 2L, 3L);
    awaitHandled(3);
  }

  @Test
  void should_say_which_ids_of_a_partial_answer_are_not_in_the_batch() throws Exception {
    start(settings(), b -> BulkHandler.Result.partial(Set.of(1L, 2L, 99L), "rows 3+ refused"));
    BufferBatch b = batch(1, 4);
    produce(b);

    ConsumerRecord<byte[], byte[]> dead = deadLetteredRest(b, 3L, 4L);
    assertThat(SinkHeaders.text(dead.headers().lastHeader(SinkHeaders.ERROR_MESSAGE).value()))
        .contains(
            "2 event(s) left after 3 attempt(s): rows 3+ refused (the answer also named 1 id(s)"
                + " not in the batch, ignored: 99)");
    assertThat(rows(1, 2)).as("what the answer named and the batch had is handled").isZero();
  }

  @Test
  void should_dead_letter_what_is_left_after_max_attempts_and_delete_its_rows() throws Exception {
    BulkHandler twoThenDown =
        b ->
            b.attempt() == 1
                ? BulkHandler.Result.partial(Set.of(1L, 2L), "rows 3+ timed out")
                : BulkHandler.Result.retry("service unavailable");
    start(settings(), twoThenDown);
    BufferBatch b = batch(1, 10);
    produce(b);

    ConsumerRecord<byte[], byte[]> dead = deadLetteredRest(b, 3L, 4L, 5L, 6L, 7L, 8L, 9L, 10L);
    assertThat(SinkHeaders.text(dead.headers().lastHeader(SinkHeaders.ERROR_MESSAGE).value()))
        .contains("8 event(s) left after 3 attempt(s): service unavailable");
    assertThat(rowsSaid(dead)).as("for a replay: hand them all over").isEqualTo("deleted");
    await().atMost(TIMEOUT).until(() -> rows(1, 10) == 0);
    assertThat(registry.get("spillway_buffer_dead_lettered_events").counter().count()).isEqualTo(8);
  }

  @Test
  void should_delete_the_rows_of_a_dead_lettered_batch_only_once_its_table_is_out_of_stop()
      throws Exception {
    AtomicReference<Health> health = new AtomicReference<>(Health.NORMAL);
    AtomicInteger calls = new AtomicInteger();
    start(
        settings().withAttempts(1, Duration.ofMillis(10), OnExhausted.DELETE),
        b -> {
          calls.incrementAndGet();
          health.set(new Health.Stop("replication lag 5 min")); // as the last call ends
          return BulkHandler.Result.retry("service unavailable");
        },
        (database, t) -> health.get());
    BufferBatch b = batch(1, 5);
    produce(b);

    deadLetteredRest(b, 1L, 2L, 3L, 4L, 5L);
    await()
        .during(Duration.ofSeconds(1))
        .atMost(TIMEOUT)
        .alias("no row deleted while the table is at STOP")
        .until(() -> rows(1, 5) == 5);

    health.set(Health.NORMAL);
    await().atMost(TIMEOUT).until(() -> rows(1, 5) == 0);
    assertThat(calls).as("the handler not called again").hasValue(1);
    assertThat(registry.get("spillway_buffer_dead_lettered_batches").counter().count())
        .as("dead-lettered once")
        .isEqualTo(1);
  }

  @Test
  void should_put_back_only_the_rest_of_a_replayed_batch_paused_after_a_partial_success()
      throws Exception {
    // Replayed after on-exhausted: delete: no row tells a later run what was handled.
    TestSql.exec(ds, "DELETE FROM " + table.quoted() + " WHERE id BETWEEN 1 AND 10");
    List<Seen> first = new CopyOnWriteArrayList<>();
    Sink firstSink =
        start(
            settings().withAttempts(3, Duration.ofMinutes(5), OnExhausted.DELETE),
            evenIdsWhen(first, b -> true));
    BufferBatch b = batch(1, 10);
    produceReplayed(b);
    await().atMost(TIMEOUT).until(() -> !first.isEmpty());
    firstSink.close(Duration.ofSeconds(20)); // the run is waiting out its backoff: it pauses
    sinks.remove(firstSink);

    List<Seen> second = new CopyOnWriteArrayList<>();
    start(
        settings(),
        bulk -> {
          second.add(new Seen(bulk.groupId(), bulk.attempt(), bulk.ids()));
          return BulkHandler.Result.success();
        });
    await().atMost(TIMEOUT).until(() -> !second.isEmpty());
    assertThat(first).hasSize(1);
    assertThat(second.get(0).ids()).as("only the rest").containsExactly(1L, 3L, 5L, 7L, 9L);
    assertThat(second.get(0).groupId()).isEqualTo(b.groupId());
    assertThat(second.get(0).attempt()).isEqualTo(1);
    assertThat(firstSink.metrics().requeuedCount()).isEqualTo(1);
  }

  @Test
  void should_keep_the_rows_of_dead_lettered_events_when_told_to() throws Exception {
    BufferSettings keep = settings().withAttempts(2, Duration.ofMillis(20), OnExhausted.KEEP);
    Sink sink = start(keep, b -> BulkHandler.Result.reject("400 Bad Request"));
    produce(batch(1, 4));

    TopicReader.readAtLeast(infra.bootstrapServers(), topics.dlq(Pipeline.BUFFERS), 1, TIMEOUT);
    await().atMost(TIMEOUT).until(() -> sink.metrics().deadLetteredCount() == 1);
    await()
        .atMost(TIMEOUT)
        .until(() -> registry.get("spillway_buffer_dead_lettered_events").counter().count() == 4);
    awaitCommitted(1);
    assertThat(rows(1, 4)).as("kept for someone to look at").isEqualTo(4);
    assertThat(
            registry.get("spillway_buffer_handler_calls").tag("result", "reject").counter().count())
        .as("a rejection is not retried")
        .isEqualTo(1);
  }

  @Test
  void should_archive_handled_rows_in_the_same_transaction_as_their_deletion() throws Exception {
    TableName archive = new TableName(schema, "contact_activity_archive");
    TestSql.exec(
        ds,
        "CREATE TABLE "
            + archive.quoted()
            + " (id bigint PRIMARY KEY CHECK (id <> 8), contact_id bigint, activity text,"
            + " archived_at timestamptz NOT NULL DEFAULT now())");
    Sink sink = start(settings().withArchive(archive), b -> BulkHandler.Result.success());
    produce(batch(1, 5));
    await().atMost(TIMEOUT).until(() -> rows(1, 5) == 0);
    assertThat(TestSql.count(ds, "SELECT count(*) FROM " + archive.quoted())).isEqualTo(5);

    // Row 8 cannot be archived: then none of its batch may be deleted either.
    produce(batch(6, 10));
    await().atMost(TIMEOUT).until(() -> sink.metrics().deadLetteredCount() == 1);
    awaitCommitted(2);
    assertThat(rows(6, 10)).isEqualTo(5);
    assertThat(TestSql.count(ds, "SELECT count(*) FROM " + archive.quoted() + " WHERE id >= 6"))
        .isZero();
  }

  @Test
  void should_dead_letter_only_the_rest_of_a_replayed_batch_failing_on_the_database_part_way()
      throws Exception {
    TableName archive = archiveTable("CHECK (id % 2 = 0)");
    List<Seen> seen = new CopyOnWriteArrayList<>();
    start(
        settings().withArchive(archive),
        evenIdsWhen(seen, b -> b.attempt() == 1 && b.ids().size() == 10));
    BufferBatch b = batch(1, 10);
    produce(true, false, Map.of(BufferBatchHandler.ROWS, "deleted"), b);

    // Odd ids cannot be archived: they fail, alone, the way any batch failing on it does.
    ConsumerRecord<byte[], byte[]> dead = deadLetteredRest(b, 1L, 3L, 5L, 7L, 9L);
    assertThat(rowsSaid(dead))
        .as("replayed whole, as the letter it came from said its rows were gone")
        .isEqualTo("deleted");
    assertThat(seen)
        .extracting(s -> s.ids().size())
        .as("the handled even ids not handed over again, nor the odd ones the second call took")
        .containsExactly(10, 5);
    assertThat(TestSql.count(ds, "SELECT count(*) FROM " + archive.quoted())).isEqualTo(5);
    assertThat(rows(1, 10)).as("the odd rows stay").isEqualTo(5);
  }

  @Test
  void should_say_its_rows_are_kept_in_the_letter_of_a_delayed_batch_whose_topic_is_gone()
      throws Exception {
    start(settings(), b -> BulkHandler.Result.success());
    BufferBatch b = batch(1, 3);
    ProducerRecord<String, byte[]> delayed =
        new ProducerRecord<>(topics.delayed(Pipeline.BUFFERS), b.groupId(), EventSerdes.encode(b));
    delayed
        .headers()
        .add(
            SinkHeaders.CONSUME_AFTER,
            ByteBuffer.allocate(Long.BYTES).putLong(System.currentTimeMillis()).array())
        .add(SinkHeaders.BATCHES_TOPIC, SinkHeaders.text(batches + ".gone"));
    try (KafkaProducer<String, byte[]> producer =
        new KafkaProducer<>(
            Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, infra.bootstrapServers()),
            new StringSerializer(),
            new ByteArraySerializer())) {
      producer.send(delayed).get();
    }

    ConsumerRecord<byte[], byte[]> dead = deadLetteredRest(b, 1L, 2L, 3L);
    assertThat(rowsSaid(dead)).as("never handled: its rows are in the table").isEqualTo("kept");
    assertThat(rows(1, 3)).isEqualTo(3);
  }

  @Test
  void should_hand_over_and_archive_of_a_replayed_kept_batch_only_the_rows_still_buffered()
      throws Exception {
    TableName archive = archiveTable("");
    List<Object> seen = new CopyOnWriteArrayList<>();
    start(settings().withArchive(archive), recording(seen));
    // Its rows were kept when it was dead-lettered; 1-3 were handled since (inserted anew).
    TestSql.exec(ds, "DELETE FROM " + table.quoted() + " WHERE id <= 3");
    produceReplayedKept(batch(1, 6));

    await().atMost(TIMEOUT).until(() -> rows(4, 6) == 0);
    assertThat(seen).containsExactly(4L, 5L, 6L);
    assertThat(TestSql.count(ds, "SELECT count(*) FROM " + archive.quoted()))
        .as("not archived again from their events")
        .isEqualTo(3);
  }

  @Test
  void should_archive_a_replayed_batch_from_its_events_only_where_its_rows_are_gone()
      throws Exception {
    TableName archive = archiveTable("");
    start(settings().withArchive(archive), b -> BulkHandler.Result.success());
    // Rows 1-3 were deleted when the batch was dead-lettered; 4-6 were kept, and their events
    // carry a value the table's type does not read, which only their rows can stand for.
    TestSql.exec(
        ds,
        "DELETE FROM " + table.quoted() + " WHERE id <= 3",
        "ALTER TABLE " + archive.quoted() + " ADD COLUMN note text",
        "ALTER TABLE " + table.quoted() + " ADD COLUMN note text",
        "UPDATE " + table.quoted() + " SET note = 'kept' WHERE id > 3");
    List<BufferEvent> events = new ArrayList<>();
    for (BufferEvent e : batch(1, 6).events()) {
      Map<String, Object> row = new LinkedHashMap<>(e.row());
      if ((Long) row.get("id") > 3) {
        row.put("contact_id", "not a number");
      }
      events.add(copy(e, row, e.lsn(), 0));
    }
    produceReplayed(BufferBatch.of(NAME, events));

    await()
        .atMost(TIMEOUT)
        .until(() -> TestSql.count(ds, "SELECT count(*) FROM " + archive.quoted()) == 6);
    assertThat(rows(1, 6)).isZero();
    assertThat(
            TestSql.count(
                ds,
                "SELECT count(*) FROM "
                    + archive.quoted()
                    + " WHERE contact_id = 100 + id % 3 AND activity = 'call'"))
        .as("rows 1-3 from their events, 4-6 from the table")
        .isEqualTo(6);
    assertThat(
            TestSql.count(
                ds,
                "SELECT count(*) FROM "
                    + archive.quoted()
                    + " WHERE note IS NOT DISTINCT FROM"
                    + " CASE WHEN id > 3 THEN 'kept' END"))
        .as("the column added after start, from the table, and null in events older than it")
        .isEqualTo(6);
  }

  @Test
  void should_hand_over_and_archive_once_a_row_a_replayed_batch_holds_two_events_of()
      throws Exception {
    TableName archive = archiveTable("");
    List<List<Object>> calls = new CopyOnWriteArrayList<>();
    start(
        settings().withArchive(archive),
        b -> {
          calls.add(List.copyOf(b.ids()));
          return BulkHandler.Result.success();
        });
    // Its rows were deleted when it was dead-lettered; row 2 had been replaced under its key
    // (deleted, inserted again), and both its inserts were batched.
    TestSql.exec(ds, "DELETE FROM " + table.quoted() + " WHERE id <= 3");
    List<BufferEvent> events = new ArrayList<>(batch(1, 3).events());
    BufferEvent first = events.get(1);
    Map<String, Object> replaced = new LinkedHashMap<>(first.row());
    replaced.put("activity", "email");
    events.add(2, copy(first, replaced, first.lsn() + 1, 0));
    produceReplayed(BufferBatch.of(NAME, events));

    await()
        .atMost(TIMEOUT)
        .until(() -> TestSql.count(ds, "SELECT count(*) FROM " + archive.quoted()) == 3);
    assertThat(calls).as("row 2 handed over once").containsExactly(List.of(1L, 2L, 3L));
    assertThat(
            TestSql.count(
                ds,
                "SELECT count(*) FROM "
                    + archive.quoted()
                    + " WHERE id = 2 AND activity = 'email'"))
        .as("as it was last, when it was deleted")
        .isOne();
  }

  @Test
  void should_archive_the_columns_the_buffer_table_has_when_they_change_mid_batch()
      throws Exception {
    TableName archive = archiveTable("");
    TestSql.exec(ds, "ALTER TABLE " + archive.quoted() + " ADD COLUMN note text");
    Sink sink =
        start(
            settings().withArchive(archive),
            b -> {
              // Between the batch's start and the deletion of its rows.
              if (b.ids().contains(6L)) {
                TestSql.exec(
                    ds, "ALTER TABLE " + table.quoted() + " ADD COLUMN note text DEFAULT 'added'");
              } else if (b.ids().contains(11L)) {
                TestSql.exec(ds, "ALTER TABLE " + table.quoted() + " DROP COLUMN activity");
              }
              return BulkHandler.Result.success();
            });
    produce(batch(1, 5));
    await().atMost(TIMEOUT).until(() -> rows(1, 5) == 0);
    produce(batch(6, 10));
    await().atMost(TIMEOUT).until(() -> rows(6, 10) == 0);
    produce(batch(11, 15));
    await().atMost(TIMEOUT).until(() -> rows(11, 15) == 0);

    assertThat(sink.metrics().deadLetteredCount()).isZero();
    assertThat(
            TestSql.count(
                ds,
                "SELECT count(*) FROM "
                    + archive.quoted()
                    + " WHERE contact_id = 100 + id % 3 AND CASE WHEN id <= 5 THEN note IS NULL"
                    + " ELSE note = 'added' END AND CASE WHEN id <= 10 THEN activity = 'call'"
                    + " ELSE activity IS NULL END"))
        .as("a column added while a batch ran archived with it, one dropped left out after")
        .isEqualTo(15);
  }

  /** Either table may change: the buffer table gets a column first, or the archive loses one. */
  @Test
  void should_dead_letter_only_the_events_whose_rows_are_left_when_a_statement_fails_for_good()
      throws Exception {
    TableName archive = archiveTable("");
    start(settings().withArchive(archive), b -> BulkHandler.Result.success());
    // Rows 1 and 2 were handled by an earlier run of the batch, which then crashed before its
    // offset was committed: the batch comes again, and the archive lacks a column by then.
    TestSql.exec(
        ds,
        "DELETE FROM " + table.quoted() + " WHERE id IN (1, 2)",
        "ALTER TABLE " + archive.quoted() + " DROP COLUMN activity");
    BufferBatch b = batch(1, 5);
    produce(b);

    ConsumerRecord<byte[], byte[]> dead = deadLetteredRest(b, 3L, 4L, 5L);
    assertThat(rows(3, 5)).isEqualTo(3);
    assertThat(rowsSaid(dead)).as("for a replay: hand over those still there").isEqualTo("kept");
    assertOneBatchDeadLetteredWith(3, "the events dead-lettered, not the batch's");
  }

  @Test
  void should_dead_letter_only_the_events_whose_rows_are_left_when_retries_are_spent()
      throws Exception {
    List<List<Object>> calls = new CopyOnWriteArrayList<>();
    start(
        settings(),
        b -> {
          calls.add(b.ids());
          return BulkHandler.Result.success();
        });
    // Rows 1 and 2 were handled and deleted by an earlier run, which then crashed; now every
    // deletion fails with an error worth retrying (a serialization failure), again and again.
    TestSql.exec(
        ds,
        "DELETE FROM " + table.quoted() + " WHERE id IN (1, 2)",
        "CREATE FUNCTION "
            + schema
            + ".conflicting() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RAISE EXCEPTION"
            + " 'could not serialize access' USING ERRCODE = '40001'; END$$",
        "CREATE TRIGGER conflicting BEFORE DELETE ON "
            + table.quoted()
            + " FOR EACH ROW EXECUTE FUNCTION "
            + schema
            + ".conflicting()");
    BufferBatch b = batch(1, 5);
    produce(b);

    deadLetteredRest(b, 3L, 4L, 5L); // a replay hands over these, not the two handled already
    assertOneBatchDeadLetteredWith(3, "the events dead-lettered, not the batch's");
    assertThat(calls)
        .as("handed over once: the retries delete what that call took")
        .containsExactly(List.of(3L, 4L, 5L));
    assertThat(rows(3, 5)).isEqualTo(3);
  }

  @ParameterizedTest(name = "{0} {1}")
  @CsvSource({
    "table, ADD COLUMN note text, lacks the column(s) note",
    "archive, DROP COLUMN activity, lacks the column(s) activity",
    "archive, RENAME TO gone, does not exist (dropped or renamed?)"
  })
  void should_dead_letter_unhandled_a_batch_whose_table_has_a_column_its_archive_lacks(
      String changed, String alteration, String said) throws Exception {
    TableName archive = archiveTable("");
    AtomicInteger calls = new AtomicInteger();
    start(
        settings().withArchive(archive),
        b -> {
          calls.incrementAndGet();
          return BulkHandler.Result.success();
        });
    TestSql.exec(
        ds,
        "ALTER TABLE " + (changed.equals("table") ? table : archive).quoted() + " " + alteration);
    BufferBatch b = batch(1, 5);
    produce(b);

    ConsumerRecord<byte[], byte[]> dead = deadLetteredRest(b, 1L, 2L, 3L, 4L, 5L);
    assertThat(SinkHeaders.text(dead.headers().lastHeader(SinkHeaders.ERROR_MESSAGE).value()))
        .contains("archive-table " + archive.displayName() + " " + said);
    assertThat(calls).as("the handler is not given what cannot be archived").hasValue(0);
    assertThat(rows(1, 5)).as("its rows stay buffered").isEqualTo(5);
    assertOneBatchDeadLetteredWith(5, "counted in status like every dead letter");
  }

  @Test
  void should_check_the_columns_again_before_calling_the_handler_again() throws Exception {
    TableName archive = archiveTable("");
    AtomicInteger calls = new AtomicInteger();
    start(
        settings().withArchive(archive),
        b -> {
          if (calls.incrementAndGet() == 1) { // the table changes during the first call
            TestSql.exec(ds, "ALTER TABLE " + table.quoted() + " ADD COLUMN note text");
            return BulkHandler.Result.retry("busy");
          }
          return BulkHandler.Result.success();
        });
    BufferBatch b = batch(1, 5);
    produce(b);

    ConsumerRecord<byte[], byte[]> dead = deadLetteredRest(b, 1L, 2L, 3L, 4L, 5L);
    assertThat(SinkHeaders.text(dead.headers().lastHeader(SinkHeaders.ERROR_MESSAGE).value()))
        .contains("archive-table " + archive.displayName() + " lacks the column(s) note");
    assertThat(calls).as("not handed over again what cannot be archived").hasValue(1);
    assertThat(rows(1, 5)).as("its rows stay buffered").isEqualTo(5);
  }

  @Test
  void should_go_on_with_the_attempts_and_the_retry_after_of_a_run_a_stop_ended() throws Exception {
    AtomicReference<Health> health = new AtomicReference<>(Health.NORMAL);
    List<Integer> attempts = new CopyOnWriteArrayList<>();
    List<Long> at = new CopyOnWriteArrayList<>();
    start(
        settings(),
        b -> {
          attempts.add(b.attempt());
          at.add(System.nanoTime());
          return attempts.size() == 1
              ? new BulkHandler.Result.Retry("busy", Duration.ofSeconds(3))
              : BulkHandler.Result.success();
        },
        (database, t) -> health.get());
    produce(batch(1, 5));
    await().atMost(TIMEOUT).until(() -> attempts.size() == 1);

    health.set(new Health.Stop("lock waits")); // the run ends in its wait for Retry-After
    await()
        .atMost(TIMEOUT)
        .until(() -> registry.get("spillway_buffer_batches_in_flight").gauge().value() == 0);
    assertThat(attempts).as("the STOP ended the run before its next call").hasSize(1);
    health.set(Health.NORMAL);

    await().atMost(TIMEOUT).until(() -> rows(1, 5) == 0);
    assertThat(attempts).as("numbered on across the runs").containsExactly(1, 2);
    assertThat(Duration.ofNanos(at.get(1) - at.get(0)))
        .as("the next run kept the Retry-After of the first")
        .isGreaterThanOrEqualTo(Duration.ofSeconds(3));
  }

  /**
   * A session of the application's holding a row of the buffer table locked, taken from within a
   * handler call, so the run's delete of that row waits on it.
   */
  private final class RowLock {
    private final AtomicReference<Connection> session = new AtomicReference<>();
    private final AtomicLong pid = new AtomicLong();

    /** Locks the row, the first time only; whether this call did. */
    boolean takeOnce(long id) throws SQLException {
      if (session.get() != null) {
        return false;
      }
      Connection c = ds.getConnection();
      c.setAutoCommit(false);
      try (Statement st = c.createStatement();
          ResultSet rs =
              st.executeQuery(
                  "SELECT pg_backend_pid() FROM "
                      + table.quoted()
                      + " WHERE id = "
                      + id
                      + " FOR UPDATE")) {
        rs.next();
        pid.set(rs.getLong(1));
      }
      session.set(c);
      return true;
    }

    /** Lets the row go. */
    void letGo() throws SQLException {
      try (Connection c = session.get()) {
        c.commit();
      }
    }

    /**
     * Once a statement waits on the lock, cancels it, as a statement or lock timeout would, and
     * lets the row go.
     */
    void cancelWhatWaitsThenLetGo() throws Exception {
      cancelWhatWaitsThenLetGo(() -> {});
    }

    /** The same, running {@code meanwhile} before it lets the row go. */
    void cancelWhatWaitsThenLetGo(Runnable meanwhile) throws Exception {
      await().atMost(TIMEOUT).until(() -> session.get() != null);
      TestSql.awaitBlockedBy(ds, pid.get());
      TestSql.count(
          ds, "SELECT count(pg_cancel_backend(pid)) FROM (" + TestSql.blockedBy(pid.get()) + ") b");
      meanwhile.run();
      try (Connection c = session.get()) {
        c.commit();
      }
    }
  }

  @ParameterizedTest
  @ValueSource(ints = {3, 1})
  void should_delete_what_a_call_took_without_calling_again_when_deleting_it_failed(int maxAttempts)
      throws Exception {
    List<Integer> attempts = new CopyOnWriteArrayList<>();
    List<Long> at = new CopyOnWriteArrayList<>();
    List<List<Object>> given = new CopyOnWriteArrayList<>();
    RowLock lock = new RowLock();
    Duration backoff = Duration.ofSeconds(3);
    Sink sink =
        start(
            settings().withAttempts(maxAttempts, backoff, OnExhausted.KEEP),
            b -> {
              attempts.add(b.attempt());
              at.add(System.nanoTime());
              given.add(b.ids());
              return lock.takeOnce(1) // row 1 held while the run deletes it
                  ? BulkHandler.Result.partial(Set.of(1L, 2L, 3L), "4 and 5 later")
                  : BulkHandler.Result.success();
            });
    produce(batch(1, 5));
    lock.cancelWhatWaitsThenLetGo();

    await().atMost(TIMEOUT).until(() -> rows(1, 3) == 0);
    if (maxAttempts > 1) {
      await().atMost(TIMEOUT).until(() -> rows(4, 5) == 0);
      assertThat(given)
          .as("rows 1 to 3, taken by the first call, deleted without a second")
          .containsExactly(List.of(1L, 2L, 3L, 4L, 5L), List.of(4L, 5L));
      assertThat(attempts).as("the second call is the second attempt").containsExactly(1, 2);
      assertThat(Duration.ofNanos(at.get(1) - at.get(0)))
          .as("the second call waited the retry-backoff after the first")
          .isGreaterThanOrEqualTo(backoff);
    } else {
      await().atMost(TIMEOUT).until(() -> sink.metrics().deadLetteredCount() == 1);
      ConsumerRecord<byte[], byte[]> dead =
          TopicReader.readAtLeast(
                  infra.bootstrapServers(), topics.dlq(Pipeline.BUFFERS), 1, TIMEOUT)
              .get(0);
      assertThat(SinkHeaders.text(dead.headers().lastHeader(SinkHeaders.ERROR_MESSAGE).value()))
          .endsWith("2 event(s) left after 1 attempt(s): 4 and 5 later");
      awaitCommitted(1);
      assertThat(given).as("no call past max-attempts").hasSize(1);
      assertThat(rows(4, 5)).as("kept").isEqualTo(2);
    }
  }

  @Test
  void should_delete_what_a_call_took_without_calling_again_after_giving_up_on_a_lock()
      throws Exception {
    AtomicInteger calls = new AtomicInteger();
    RowLock lock = new RowLock();
    start(
        settings().withAttempts(3, Duration.ofMillis(20), OnExhausted.KEEP),
        b -> {
          calls.incrementAndGet();
          lock.takeOnce(1); // row 1 held past the pool's lock timeout while the run deletes it
          return BulkHandler.Result.success();
        });
    produce(batch(1, 5));

    await()
        .atMost(TIMEOUT)
        .alias("the delete gave up at the lock timeout (55P03)")
        .until(
            () ->
                registry.find("spillway_sink_lock_timeouts").counters().stream()
                        .mapToDouble(io.micrometer.core.instrument.Counter::count)
                        .sum()
                    >= 1);
    assertThat(rows(1, 5)).as("nothing deleted yet").isEqualTo(5);
    lock.letGo();

    await().atMost(TIMEOUT).until(() -> rows(1, 5) == 0);
    assertThat(calls).as("deleted without a second call").hasValue(1);
  }

  @Test
  void
      should_delete_the_rows_of_a_dead_lettered_batch_once_more_and_do_nothing_else_when_that_failed()
          throws Exception {
    List<Integer> attempts = new CopyOnWriteArrayList<>();
    RowLock lock = new RowLock();
    Sink sink =
        start(
            settings().withAttempts(1, Duration.ofMillis(20), OnExhausted.DELETE),
            b -> {
              attempts.add(b.attempt());
              lock.takeOnce(1); // row 1 held while the dead-lettered rows are deleted
              return BulkHandler.Result.reject("400 Bad Request");
            });
    // Row 6 is gone when the batch first runs, and inserted again (a natural key) before the
    // run that deletes what was dead-lettered.
    TestSql.exec(ds, "DELETE FROM " + table.quoted() + " WHERE id = 6");
    produce(batch(1, 6));
    lock.cancelWhatWaitsThenLetGo(
        () -> TestSql.exec(ds, "INSERT INTO " + table.quoted() + " VALUES (6, 100, 'call')"));

    await().atMost(TIMEOUT).until(() -> rows(1, 5) == 0);
    assertThat(rows(6, 6)).as("not dead-lettered, so not deleted").isOne();
    assertThat(attempts).as("the handler called once").containsExactly(1);
    assertThat(sink.metrics().deadLetteredCount()).as("dead-lettered once").isOne();
    assertThat(registry.get("spillway_buffer_dead_lettered_events").counter().count()).isEqualTo(5);
  }

  @Test
  void should_leave_the_rows_of_a_dead_lettered_batch_a_trigger_will_not_let_it_delete()
      throws Exception {
    TestSql.exec(
        ds,
        "CREATE FUNCTION "
            + schema
            + ".no_deletes() RETURNS trigger LANGUAGE plpgsql AS"
            + " $$BEGIN RAISE EXCEPTION 'rows of this table are kept'; END$$",
        "CREATE TRIGGER no_deletes BEFORE DELETE ON "
            + table.quoted()
            + " FOR EACH ROW EXECUTE FUNCTION "
            + schema
            + ".no_deletes()");
    List<Integer> attempts = new CopyOnWriteArrayList<>();
    Sink sink =
        start(
            settings().withAttempts(1, Duration.ofMillis(20), OnExhausted.DELETE),
            b -> {
              attempts.add(b.attempt());
              return BulkHandler.Result.reject("400 Bad Request");
            });
    produce(batch(1, 5));

    awaitCommitted(1);
    assertThat(attempts).as("the handler called once").containsExactly(1);
    assertThat(sink.metrics().deadLetteredCount()).as("dead-lettered once").isOne();
    assertThat(rows(1, 5)).as("kept: the trigger refuses").isEqualTo(5);
  }

  @Test
  void should_honour_the_rate_limit() throws Exception {
    List<Long> at = new CopyOnWriteArrayList<>();
    start(
        settings().withConcurrency(4, 5.0),
        b -> {
          at.add(System.nanoTime());
          return BulkHandler.Result.success();
        });
    List<BufferBatch> all = new ArrayList<>();
    for (long id = 1; id <= 8; id++) {
      all.add(batch(id, id));
    }
    produce(all.toArray(BufferBatch[]::new));

    await().atMost(TIMEOUT).until(() -> rows(1, 8) == 0);
    List<Long> sorted = at.stream().sorted().toList();
    assertThat(sorted).hasSize(8);
    for (int i = 0; i + 5 < sorted.size(); i++) {
      // 5 per second, one permit every 200 ms: six calls span at least four whole intervals
      // (the first may come at the end of its interval), whatever the handler's speed.
      assertThat((sorted.get(i + 5) - sorted.get(i)) / 1_000_000)
          .as("time from call %d to call %d", i, i + 5)
          .isGreaterThanOrEqualTo(790);
    }
  }

  @Test
  void should_not_hold_a_stopping_worker_while_a_batch_waits_for_the_rate_limit() throws Exception {
    List<String> called = new CopyOnWriteArrayList<>();
    // One call every 20 s: the second batch waits for its permit far longer than this test runs.
    Sink sink = start(settings().withConcurrency(2, 0.05), recordingGroups(called));
    BufferBatch one = batch(1, 5);
    BufferBatch other = batch(6, 10);
    produce(one, other);
    await().atMost(TIMEOUT).until(() -> rows(1, 10) == 5);
    // The first run has ended (its outcome is counted after it leaves the in-flight gauge), so the
    // one batch in flight is the second, waiting for its permit.
    await()
        .atMost(TIMEOUT)
        .until(
            () ->
                batchRuns("Done") == 1
                    && registry.get("spillway_buffer_batches_in_flight").gauge().value() == 1);

    sinks.remove(sink);
    sink.close(Duration.ofSeconds(60)); // the waiting run ends at its next checkpoint, uncalled

    assertThat(called).as("the handler was called once, for one batch").hasSize(1);
    // Either batch may take the one permit; the other waits.
    String waiting = called.get(0).equals(one.groupId()) ? other.groupId() : one.groupId();
    assertThat(rows(1, 10)).as("the waiting batch's rows stay for its next delivery").isEqualTo(5);
    assertThat(sink.metrics().deadLetteredCount()).isZero();

    // The next worker runs the waiting batch.
    List<String> next = new CopyOnWriteArrayList<>();
    start(settings(), recordingGroups(next));
    await().atMost(TIMEOUT).until(() -> rows(1, 10) == 0);
    assertThat(next).containsExactly(waiting);
  }

  /** Batch runs the sink counted with this outcome. */
  private double batchRuns(String outcome) {
    Counter c = registry.find("spillway_sink_batches").tag("outcome", outcome).counter();
    return c == null ? 0 : c.count();
  }

  @Test
  void should_run_no_more_batches_at_once_than_max_in_flight() throws Exception {
    assertCallsHeldToTwo(2, false, 2);
  }

  @Test
  void should_hold_calls_to_max_in_flight_whatever_room_the_sink_has() throws Exception {
    // The sink could run a batch of each partition at once: the buffer's limit is what holds the
    // calls to 2; the others are taken and wait for a call.
    assertCallsHeldToTwo(PARTITIONS, true, PARTITIONS);
  }

  /**
   * A buffer of {@code max-in-flight} 2, with room in the sink for {@code sinkInFlight} batches,
   * calls its handler for no more than 2 at once, with {@code inFlight} batches taken meanwhile.
   *
   * @param spread whether the 6 batches lie on every partition in turn, or where their keys put
   *     them
   */
  private void assertCallsHeldToTwo(int sinkInFlight, boolean spread, int inFlight)
      throws Exception {
    AtomicInteger running = new AtomicInteger();
    AtomicInteger most = new AtomicInteger();
    AtomicInteger calls = new AtomicInteger();
    CountDownLatch release = new CountDownLatch(1);
    Sink sink =
        start(
            settings().withConcurrency(2, null),
            b -> {
              calls.incrementAndGet();
              most.accumulateAndGet(running.incrementAndGet(), Math::max);
              try {
                release.await();
              } finally {
                running.decrementAndGet();
              }
              return BulkHandler.Result.success();
            },
            HealthGate.ALWAYS_NORMAL,
            ds,
            sinkInFlight);
    BufferBatch[] all = new BufferBatch[6];
    for (int i = 0; i < all.length; i++) {
      all[i] = batch(2 * i + 1, 2 * i + 2);
    }
    produce(false, spread, all);

    await().atMost(TIMEOUT).until(() -> running.get() == 2);
    int loops = sink.loops();
    await().atMost(TIMEOUT).until(() -> sink.loops() >= loops + 30);
    assertThat(most.get()).isEqualTo(2);
    assertThat(calls.get()).isEqualTo(2);
    assertThat(registry.get("spillway_buffer_batches_in_flight").gauge().value())
        .as("batches being run: called, or waiting for a call")
        .isEqualTo(inFlight);
    release.countDown();
    await().atMost(TIMEOUT).until(() -> rows(1, 12) == 0);
    assertThat(most.get()).isEqualTo(2);
  }

  @Test
  void should_redeliver_a_batch_abandoned_mid_call_with_the_same_group_id() throws Exception {
    List<String> firstKeys = new CopyOnWriteArrayList<>();
    CountDownLatch never = new CountDownLatch(1);
    Sink first =
        start(
            settings(),
            b -> {
              firstKeys.add(b.groupId());
              never.await(); // the worker dies here
              return BulkHandler.Result.success();
            });
    BufferBatch b = batch(1, 6);
    produce(b);
    await().atMost(TIMEOUT).until(() -> !firstKeys.isEmpty());
    first.close(Duration.ZERO); // like a crash: nothing in hand is committed
    sinks.remove(first);

    List<String> secondKeys = new CopyOnWriteArrayList<>();
    start(settings(), recordingGroups(secondKeys));
    await().atMost(TIMEOUT).until(() -> rows(1, 6) == 0);
    assertThat(firstKeys).containsExactly(b.groupId());
    assertThat(secondKeys).containsExactly(b.groupId());
  }

  @Test
  void should_post_rows_as_json_with_the_group_id_and_honour_retry_after() throws Exception {
    try (BulkReceiver receiver =
        new BulkReceiver()
            .answering(
                n ->
                    n == 0
                        ? new BulkReceiver.Answer(429, Map.of("Retry-After", "1"), "slow down")
                        : BulkReceiver.Answer.ok())) {
      HandlerSpec.Http spec =
          new HandlerSpec.Http(
              receiver.url(), Map.of("Authorization", "Bearer t"), Duration.ofSeconds(5));
      start(settings(), new HttpBulkHandler(spec, Clock.systemUTC()));
      BufferBatch b = batch(1, 3);
      produce(b);

      await().atMost(TIMEOUT).until(() -> rows(1, 3) == 0);
      List<BulkReceiver.Call> calls = receiver.calls();
      assertThat(calls).hasSize(2);
      assertThat(calls).allMatch(c -> b.groupId().equals(c.idempotencyKey()));
      assertThat(calls)
          .as("the configured headers, and the body's type")
          .allSatisfy(
              c -> {
                assertThat(c.headers()).containsEntry("authorization", "Bearer t");
                assertThat(c.headers().get("content-type")).startsWith("application/json");
              });
      assertThat(calls.get(1).rows())
          .extracting(r -> r.get("id"), r -> r.get("activity"))
          .containsExactly(
              org.assertj.core.groups.Tuple.tuple(1, "call"),
              org.assertj.core.groups.Tuple.tuple(2, "call"),
              org.assertj.core.groups.Tuple.tuple(3, "call"));
      assertThat((calls.get(1).atNanos() - calls.get(0).atNanos()) / 1_000_000)
          .as("waited as Retry-After said, not the 20 ms backoff")
          .isGreaterThanOrEqualTo(950);
    }
  }

  @Test
  void should_wait_until_the_http_date_a_retry_after_names() throws Exception {
    try (BulkReceiver receiver =
        new BulkReceiver()
            .answering(
                n ->
                    n == 0
                        ? new BulkReceiver.Answer(
                            503, Map.of("Retry-After", threeSecondsAhead()), "maintenance")
                        : BulkReceiver.Answer.ok())) {
      HandlerSpec.Http spec = new HandlerSpec.Http(receiver.url(), Map.of(), Duration.ofSeconds(5));
      start(settings(), new HttpBulkHandler(spec, Clock.systemUTC()));
      produce(batch(1, 3));

      await().atMost(TIMEOUT).until(() -> rows(1, 3) == 0);
      List<BulkReceiver.Call> calls = receiver.calls();
      assertThat(calls).hasSize(2);
      assertThat((calls.get(1).atNanos() - calls.get(0).atNanos()) / 1_000_000)
          .as("waited until the date Retry-After named, not the 20 ms backoff")
          .isGreaterThanOrEqualTo(1_900);
    }
  }

  /** Three seconds from now as an HTTP date, in its whole seconds: at least two from now. */
  private static String threeSecondsAhead() {
    return java.time.format.DateTimeFormatter.RFC_1123_DATE_TIME.format(
        java.time.ZonedDateTime.now(java.time.ZoneOffset.UTC).plusSeconds(3).withNano(0));
  }

  @Test
  void should_dead_letter_at_once_when_the_endpoint_rejects_the_batch() throws Exception {
    try (BulkReceiver receiver =
        new BulkReceiver().answering(n -> new BulkReceiver.Answer(422, Map.of(), "bad contact"))) {
      HandlerSpec.Http spec = new HandlerSpec.Http(receiver.url(), Map.of(), Duration.ofSeconds(5));
      Sink sink = start(settings(), new HttpBulkHandler(spec, Clock.systemUTC()));
      produce(batch(1, 3));

      ConsumerRecord<byte[], byte[]> dead =
          TopicReader.readAtLeast(
                  infra.bootstrapServers(), topics.dlq(Pipeline.BUFFERS), 1, TIMEOUT)
              .get(0);
      assertThat(SinkHeaders.text(dead.headers().lastHeader(SinkHeaders.ERROR_MESSAGE).value()))
          .contains("3 event(s) rejected by its handler on attempt 1: ")
          .contains("answered 422: bad contact");
      assertThat(receiver.calls()).hasSize(1);
      await().atMost(TIMEOUT).until(() -> rows(1, 3) == 0);
      assertThat(sink.metrics().deadLetteredCount()).isEqualTo(1);
    }
  }

  @Test
  void should_not_call_a_rejecting_handler_again_while_kafka_refuses_its_dead_letter()
      throws Exception {
    AtomicInteger calls = new AtomicInteger();
    String dlq = topics.dlq(Pipeline.BUFFERS);
    // Every letter is larger than the topic takes, from its start (a setting changed later takes a
    // moment to reach the broker's log).
    try (org.apache.kafka.clients.admin.Admin admin =
        org.apache.kafka.clients.admin.Admin.create(
            Map.of("bootstrap.servers", infra.bootstrapServers()))) {
      admin
          .createTopics(
              List.of(
                  new org.apache.kafka.clients.admin.NewTopic(dlq, 1, (short) 1)
                      .configs(Map.of("max.message.bytes", "64"))))
          .all()
          .get();
    }
    start(
        settings().withAttempts(5, Duration.ofMillis(20), OnExhausted.DELETE),
        batch -> {
          calls.incrementAndGet();
          return BulkHandler.Result.reject("bad contact");
        });
    produce(batch(1, 3));
    await().atMost(TIMEOUT).until(() -> calls.get() == 1);

    // The batch runs again and again as its letter is refused: dead-lettered, not handed over.
    await()
        .during(Duration.ofSeconds(2))
        .atMost(Duration.ofSeconds(10))
        .until(() -> calls.get() == 1 && rows(1, 3) == 3);
    TopicSettings.maxMessageBytes(infra.bootstrapServers(), dlq, "1048588");

    ConsumerRecord<byte[], byte[]> dead =
        TopicReader.readAtLeast(infra.bootstrapServers(), dlq, 1, TIMEOUT).get(0);
    assertThat(SinkHeaders.text(dead.headers().lastHeader(SinkHeaders.ERROR_MESSAGE).value()))
        .endsWith("3 event(s) rejected by its handler on attempt 1: bad contact");
    await().atMost(TIMEOUT).until(() -> rows(1, 3) == 0);
    assertThat(calls).hasValue(1);
  }

  @Test
  void should_refuse_an_sql_handler_postgresql_refuses_before_any_batch_meets_it()
      throws Exception {
    BufferTable t = BufferPipeline.check(settings(), ds);
    java.util.function.Function<String, String> refusal =
        sql ->
            assertThrows(
                    ConfigException.class,
                    () ->
                        BufferPipeline.handler(
                            BufferSettings.of(NAME, table, DB, new HandlerSpec.Sql(sql)),
                            t,
                            ds,
                            Clock.systemUTC()))
                .getMessage();
    assertThat(refusal.apply("INSERTT INTO synced SELECT unnest(:ids)"))
        .contains("buffers." + NAME)
        .endsWith(
            " has an sql handler PostgreSQL refuses: syntax error at or near \"INSERTT\" (at"
                + " character 1).");
    assertThat(refusal.apply("INSERT INTO " + schema + ".nosuch SELECT unnest(:ids)"))
        .endsWith(
            " has an sql handler PostgreSQL refuses: relation \""
                + schema
                + ".nosuch\" does not exist (at character 13).");
    assertThat(refusal.apply("SELECT nosuch FROM " + table.quoted() + " WHERE id = ANY (:ids)"))
        .endsWith(
            " has an sql handler PostgreSQL refuses: column \"nosuch\" does not exist (at"
                + " character 8).");

    // Taken: its parameters are typed as a batch binds them, and it does not run.
    TableName synced = new TableName(schema, "synced_once");
    TestSql.exec(ds, "CREATE TABLE " + synced.quoted() + " (id bigint, g text)");
    BufferPipeline.handler(
        BufferSettings.of(
            NAME,
            table,
            DB,
            new HandlerSpec.Sql(
                "INSERT INTO " + synced.quoted() + " SELECT 1, :group_id WHERE :ids IS NOT NULL")),
        t,
        ds,
        Clock.systemUTC());
    assertThat(TestSql.count(ds, "SELECT count(*) FROM " + synced.quoted())).isZero();
  }

  @Test
  void should_let_the_sql_handler_wait_for_a_lock_past_the_pools_lock_timeout() throws Exception {
    TableName synced = new TableName(schema, "synced_later");
    TestSql.exec(ds, "CREATE TABLE " + synced.quoted() + " (activity_id bigint PRIMARY KEY)");
    BufferSettings s =
        BufferSettings.of(
                NAME,
                table,
                DB,
                new HandlerSpec.Sql(
                    "INSERT INTO "
                        + synced.quoted()
                        + " SELECT unnest(:ids) ON CONFLICT DO NOTHING"))
            .withAttempts(1, Duration.ofMillis(20), OnExhausted.DELETE);
    Sink sink = startAsConfigured(s);
    // A schema change holds the handler's table for 3 s, past the pool's 2 s lock timeout: the
    // statement is the user's, and waits as it would anywhere else.
    try (Connection migration = TestSql.lockTable(ds, synced.quoted())) {
      produce(batch(1, 7));
      await()
          .atMost(TIMEOUT)
          .alias("the handler's statement waiting on the lock past 2.5 s")
          .until(
              () ->
                  TestSql.sessions(
                          ds,
                          "INSERT INTO " + synced.quoted(),
                          "wait_event_type = 'Lock'"
                              + " AND clock_timestamp() - query_start > interval '2.5 s'")
                      == 1);
    }
    await().atMost(TIMEOUT).until(() -> rows(1, 7) == 0);
    assertThat(TestSql.count(ds, "SELECT count(*) FROM " + synced.quoted())).isEqualTo(7);
    assertThat(sink.metrics().deadLetteredCount())
        .as("one attempt, not spent on the lock")
        .isZero();
  }

  @Test
  void should_cancel_an_sql_handler_statement_past_its_timeout_and_count_it_a_failed_call()
      throws Exception {
    BufferSettings s =
        BufferSettings.of(
                NAME,
                table,
                DB,
                new HandlerSpec.Sql(
                    "SELECT pg_sleep(30) WHERE cardinality(:ids) > 0", Duration.ofMillis(300)))
            .withAttempts(2, Duration.ofMillis(20), OnExhausted.KEEP);
    startAsConfigured(s);
    produce(batch(1, 3));

    ConsumerRecord<byte[], byte[]> dead =
        TopicReader.readAtLeast(infra.bootstrapServers(), topics.dlq(Pipeline.BUFFERS), 1, TIMEOUT)
            .get(0);
    assertThat(SinkHeaders.text(dead.headers().lastHeader(SinkHeaders.ERROR_MESSAGE).value()))
        .contains("3 event(s) left after 2 attempt(s)")
        .contains("canceling statement due to statement timeout");
    assertThat(
            registry
                .get("spillway_buffer_handler_calls")
                .tag("buffer", NAME)
                .tag("result", "retry")
                .counter()
                .count())
        .as("each cancel a failed call")
        .isEqualTo(2);
    assertThat(rows(1, 3)).as("kept, per on-exhausted").isEqualTo(3);
  }

  @Test
  void should_cancel_an_sql_handler_statement_still_running_when_the_buffer_stops()
      throws Exception {
    String mark = "/* " + schema + " */";
    BufferSettings s =
        BufferSettings.of(
            NAME,
            table,
            DB,
            new HandlerSpec.Sql(
                mark + " SELECT pg_sleep(600) WHERE cardinality(:ids) > 0", Duration.ZERO));
    BulkHandler sql = BufferPipeline.handler(s, BufferPipeline.check(s, ds), ds, Clock.systemUTC());
    List<BulkHandler.Result> results = new CopyOnWriteArrayList<>();
    BulkHandler recorded =
        new BulkHandler() {
          @Override
          public Result handle(Batch batch) throws Exception {
            Result r = sql.handle(batch);
            results.add(r);
            return r;
          }

          @Override
          public void close() throws Exception {
            sql.close();
          }
        };
    try {
      Sink sink = start(s, recorded);
      produce(batch(1, 3));
      await()
          .atMost(TIMEOUT)
          .alias("the handler's statement running")
          .until(() -> TestSql.sessions(ds, mark, "state = 'active'") == 1);

      sinks.remove(sink);
      sink.close(Duration.ofMillis(100)); // the grace ends long before the statement would
      batchHandler.close(); // as the pipeline closes it once its sink has stopped

      await()
          .atMost(Duration.ofSeconds(10))
          .alias("the statement canceled, not left running in the database")
          .until(() -> TestSql.sessions(ds, mark, "state = 'active'") == 0);
      await().atMost(Duration.ofSeconds(10)).until(() -> !results.isEmpty());
      assertThat(results)
          .singleElement()
          .asInstanceOf(InstanceOfAssertFactories.type(BulkHandler.Result.Retry.class))
          .extracting(BulkHandler.Result.Retry::reason)
          .asString()
          .contains("canceling statement due to user request");
      assertThat(rows(1, 3)).as("the rows stay for the batch's next delivery").isEqualTo(3);
    } finally {
      // A cancel that failed leaves the statement running for ten minutes: end it here.
      TestSql.exec(
          ds,
          "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE starts_with(query, '"
              + mark
              + "') AND pid <> pg_backend_pid()");
    }
  }

  @Test
  void should_run_the_sql_handler_once_per_batch_with_the_ids_as_an_array() throws Exception {
    TableName synced = new TableName(schema, "synced");
    TestSql.exec(
        ds, "CREATE TABLE " + synced.quoted() + " (activity_id bigint PRIMARY KEY, group_id uuid)");
    HandlerSpec.Sql spec =
        new HandlerSpec.Sql(
            "INSERT INTO "
                + synced.quoted()
                + " SELECT id, CAST(:group_id AS uuid) FROM "
                + table.quoted()
                + " WHERE id = ANY (:ids) AND '{\"k\": 1}'::jsonb ? 'k'" // a ? operator
                + " ON CONFLICT DO NOTHING -- :ids in a comment is no parameter");
    BufferSettings s =
        BufferSettings.of(NAME, table, DB, spec)
            .withAttempts(3, Duration.ofMillis(20), OnExhausted.DELETE);
    startAsConfigured(s);
    BufferBatch b = batch(1, 7);
    produce(b);

    await().atMost(TIMEOUT).until(() -> rows(1, 7) == 0);
    assertThat(TestSql.count(ds, "SELECT count(*) FROM " + synced.quoted())).isEqualTo(7);
    assertThat(
            TestSql.count(
                ds,
                "SELECT count(*) FROM "
                    + synced.quoted()
                    + " WHERE group_id = '"
                    + b.groupId()
                    + "'"))
        .isEqualTo(7);
  }
}
