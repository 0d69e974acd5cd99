package dev.spillway.capture;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import dev.spillway.event.BufferEvent;
import dev.spillway.event.DeletedRecord;
import dev.spillway.event.EventSerdes;
import dev.spillway.event.Pipeline;
import dev.spillway.event.TableName;
import dev.spillway.event.Topics;
import dev.spillway.jdbc.DatabaseEndpoint;
import dev.spillway.jdbc.Databases;
import dev.spillway.runtime.EmbeddedPostgresServer;
import dev.spillway.sink.SinkHeaders;
import dev.spillway.testing.Infra;
import dev.spillway.testing.SettableClock;
import dev.spillway.testing.TcpProxy;
import dev.spillway.testing.TestSql;
import dev.spillway.testing.TopicReader;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Supplier;
import java.util.stream.Stream;
import javax.sql.DataSource;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.slf4j.LoggerFactory;

/** Capture against a real PostgreSQL and a real broker; subclasses say which ones. */
abstract class CaptureContract {
  private static final Duration TIMEOUT = Duration.ofSeconds(60);
  private static final String DB = "capture";

  protected abstract Infra infra();

  private Databases databases;
  private DataSource ds;
  private String schema;
  private Topics topics;
  private CaptureSettings settings;

  @BeforeEach
  void setUp() {
    String id = UUID.randomUUID().toString().replace("-", "").substring(0, 10);
    schema = "s" + id;
    topics = new Topics("t" + id);
    databases = infra().databases(DB);
    ds = databases.dataSource(DB);
    settings =
        new CaptureSettings(
            infra().bootstrapServers(),
            topics,
            3,
            (short) 1,
            Map.of(),
            CaptureSettings.DEFAULT_POLL_INTERVAL,
            CaptureSettings.DEFAULT_HEARTBEAT_INTERVAL,
            CaptureSettings.DEFAULT_MAX_BATCH_SIZE,
            Duration.ofMillis(200));
    TestSql.exec(ds, "CREATE SCHEMA " + schema);
  }

  @AfterEach
  void tearDown() {
    TestSql.dropCapture(ds, settings.slotName(DB));
    TestSql.exec(ds, "DROP SCHEMA " + schema + " CASCADE");
    databases.close();
  }

  private TableName table(String name) {
    return new TableName(schema, name);
  }

  /** The route of a buffer table's inserts, to its own events topic. */
  private CaptureRoute inserts(String table) {
    return new CaptureRoute(DB, table(table), ChangeKind.INSERT, topics.bufferEvents(table));
  }

  private CaptureRoute deletes(String table) {
    return new CaptureRoute(DB, table(table), ChangeKind.DELETE, topics.deletedRecords());
  }

  private Capture start(CaptureRoute... routes) throws InterruptedException {
    return start(Capture.SLOT_CHECK_INTERVAL, new SimpleMeterRegistry(), routes);
  }

  /** With the slot checked every {@code slotChecks}, and metrics in {@code metrics}. */
  private Capture start(Duration slotChecks, SimpleMeterRegistry metrics, CaptureRoute... routes)
      throws InterruptedException {
    return start(slotChecks, metrics, Clock.systemUTC(), routes);
  }

  /** As {@link #start(Duration, SimpleMeterRegistry, CaptureRoute...)}, on {@code clock}. */
  private Capture start(
      Duration slotChecks, SimpleMeterRegistry metrics, Clock clock, CaptureRoute... routes)
      throws InterruptedException {
    return Capture.start(
        new CapturePlan(List.of(routes)),
        databases,
        settings,
        new CaptureStats(metrics),
        clock,
        slotChecks);
  }

  @Test
  void should_capture_parent_deletes_and_buffer_inserts_with_keys_and_values() throws Exception {
    TestSql.exec(
        ds,
        "CREATE TABLE " + schema + ".projects (id bigint PRIMARY KEY, name text)",
        "CREATE TABLE "
            + schema
            + ".events (id bigserial PRIMARY KEY, contact_id int, kind text, amount numeric(10,2),"
            + " happened_at timestamptz, on_day date, at_local timestamp, took interval)",
        "INSERT INTO " + schema + ".projects SELECT g, 'p' || g FROM generate_series(1, 5) g");
    CaptureRoute deletes = deletes("projects");
    CaptureRoute inserts = inserts("events");

    try (Capture capture = start(deletes, inserts)) {
      String deleter =
          TestSql.text(
              ds,
              "WITH d AS (DELETE FROM "
                  + schema
                  + ".projects WHERE id IN (2, 4) RETURNING id)"
                  + " SELECT pg_current_xact_id()::xid::text FROM d LIMIT 1");
      TestSql.exec(ds, "UPDATE " + schema + ".projects SET name = 'renamed'");
      String xid =
          TestSql.text(
              ds,
              "WITH i AS (INSERT INTO "
                  + schema
                  + ".events (contact_id, kind, amount, happened_at, on_day, at_local, took)"
                  + " VALUES (7, 'call', 12.50, '2026-01-02T03:04:05Z', '2026-01-02',"
                  + " '2026-01-02 03:04:05.25', '1 day 02:00:00') RETURNING id)"
                  + " SELECT pg_current_xact_id()::xid::text FROM i");
      TestSql.exec(ds, "DELETE FROM " + schema + ".events");

      List<ConsumerRecord<byte[], byte[]>> deleted =
          TopicReader.readAtLeast(infra().bootstrapServers(), topics.deletedRecords(), 2, TIMEOUT);
      assertThat(deleted).hasSize(2);
      assertThat(new String(deleted.get(0).key(), StandardCharsets.UTF_8))
          .isEqualTo(schema + ".projects");
      List<DeletedRecord> records =
          deleted.stream().map(r -> EventSerdes.decodeDeletedRecord(r.value())).toList();
      assertThat(records).extracting(DeletedRecord::table).containsOnly(table("projects"));
      assertThat(records).extracting(DeletedRecord::database).containsOnly(DB);
      assertThat(records)
          .extracting(r -> r.key())
          .containsExactly(Map.of("id", 2L), Map.of("id", 4L));
      assertThat(records).allSatisfy(r -> assertThat(r.commitTimeMicros()).isPositive());
      assertThat(records)
          .extracting(DeletedRecord::txId)
          .as("the deleting transaction")
          .containsOnly(Long.parseLong(deleter));

      List<ConsumerRecord<byte[], byte[]>> inserted =
          TopicReader.readAtLeast(
              infra().bootstrapServers(), topics.bufferEvents("events"), 1, TIMEOUT);
      assertThat(inserted).hasSize(1);
      BufferEvent event = EventSerdes.decodeBufferEvent(inserted.get(0).value());
      assertThat(event.table()).isEqualTo(table("events"));
      assertThat(event.row())
          .containsEntry("id", 1L)
          .containsEntry("contact_id", 7)
          .containsEntry("kind", "call")
          .containsEntry("amount", "12.50")
          .containsEntry("happened_at", "2026-01-02T03:04:05Z")
          .containsEntry("on_day", "2026-01-02")
          .containsEntry("at_local", "2026-01-02T03:04:05.25")
          .containsEntry("took", "P0Y0M1DT2H0M0S");
      assertThat(event.txId()).as("the inserting transaction").isEqualTo(Long.parseLong(xid));
      assertThat(capture.stats().snapshot())
          .extracting(
              CaptureStats.Count::table, CaptureStats.Count::kind, CaptureStats.Count::changes)
          .contains(
              org.assertj.core.groups.Tuple.tuple(table("projects"), ChangeKind.DELETE, 2L),
              org.assertj.core.groups.Tuple.tuple(table("events"), ChangeKind.INSERT, 1L));
    }
  }

  @Test
  void should_capture_tables_whose_names_hold_regex_characters_and_commas() throws Exception {
    List<String> names = List.of("audit$events", "Events+EU", "a,b", "x.y");
    for (String name : names) {
      TestSql.exec(ds, "CREATE TABLE " + table(name).quoted() + " (id bigint PRIMARY KEY, v text)");
    }
    CaptureRoute[] routes =
        names.stream()
            .map(n -> new CaptureRoute(DB, table(n), ChangeKind.INSERT, topics.bufferEvents("b")))
            .toArray(CaptureRoute[]::new);

    try (Capture capture = start(routes)) {
      for (int k = 0; k < names.size(); k++) {
        TestSql.exec(
            ds, "INSERT INTO " + table(names.get(k)).quoted() + " VALUES (" + k + ", 'v')");
      }
      List<ConsumerRecord<byte[], byte[]>> read =
          TopicReader.readAtLeast(
              infra().bootstrapServers(), topics.bufferEvents("b"), names.size(), TIMEOUT);
      assertThat(read)
          .extracting(r -> EventSerdes.decodeBufferEvent(r.value()).table())
          .containsExactlyInAnyOrderElementsOf(names.stream().map(this::table).toList());
    }
  }

  @ParameterizedTest(name = "recorded by its last start: {0}")
  @ValueSource(booleans = {true, false})
  void should_read_once_the_rows_of_a_loose_foreign_key_parent_that_gains_a_buffer(boolean recorded)
      throws Exception {
    TestSql.exec(
        ds,
        "CREATE TABLE " + schema + ".events (id bigint PRIMARY KEY, v text)",
        "CREATE TABLE " + schema + ".uploads (id bigint PRIMARY KEY, v text)");
    CaptureRoute parent = deletes("uploads");
    try (Capture capture = start(inserts("events"), parent)) {
      // Published for their deletes, with the database's inserts (for events): passed over.
      TestSql.exec(ds, "INSERT INTO " + schema + ".uploads VALUES (1, 'a'), (2, 'b')");
      insertRange(1, 1);
      awaitEvent(1); // after the uploads' inserts in the stream
    }
    if (!recorded) { // as a start of a version before the record left it
      TestSql.exec(
          ds, "DELETE FROM spillway.capture_buffered WHERE slot = '" + settings.slotName(DB) + "'");
    }

    try (Capture capture = start(inserts("events"), parent, inserts("uploads"))) {
      List<ConsumerRecord<byte[], byte[]>> read =
          TopicReader.readAtLeast(
              infra().bootstrapServers(), topics.bufferEvents("uploads"), 2, TIMEOUT);
      assertThat(ids(read)).containsExactlyInAnyOrder(1L, 2L);
    }
    try (Capture again = start(inserts("events"), parent, inserts("uploads"))) {
      TestSql.exec(ds, "INSERT INTO " + schema + ".uploads VALUES (3, 'c')");
      List<ConsumerRecord<byte[], byte[]>> read =
          TopicReader.readUntil(
              infra().bootstrapServers(),
              topics.bufferEvents("uploads"),
              r -> ids(r).contains(3L),
              TIMEOUT);
      assertThat(read).as("read once, not at every start").hasSize(3);
    }
  }

  @Test
  void should_stream_from_the_host_of_a_url_naming_several_that_answered_as_the_primary(
      @TempDir Path dir) throws Exception {
    TestSql.exec(ds, "CREATE TABLE " + schema + ".events (id bigint PRIMARY KEY, v text)");
    DatabaseEndpoint direct = databases.endpoint(DB);
    // Listed before the primary: a host that is down, as a failed primary is, and one that answers
    // read-only, as a standby does, holding the same database but neither slot nor publication.
    try (ServerSocket closed = new ServerSocket(0);
        EmbeddedPostgresServer standby =
            EmbeddedPostgresServer.start(dir, 0, List.of(direct.databaseName()))) {
      int nobody = closed.getLocalPort();
      closed.close();
      readOnly(standby, direct);
      DatabaseEndpoint listed =
          new DatabaseEndpoint(
              DB,
              "jdbc:postgresql://127.0.0.1:"
                  + nobody
                  + ",127.0.0.1:"
                  + standby.port()
                  + ","
                  + direct.host()
                  + ":"
                  + direct.port()
                  + "/"
                  + direct.databaseName()
                  + "?targetServerType=primary",
              direct.username(),
              direct.password(),
              2,
              direct.lockTimeout());
      try (Databases both = new Databases(List.of(listed), new SimpleMeterRegistry());
          Capture capture = start(both, Clock.systemUTC(), inserts("events"))) {
        insertRange(1, 1);
        awaitEvent(1);
        assertThat(capture.failure()).isEmpty();
      }
    }
  }

  /** Makes {@code server} answer {@code as}'s logins to its database read-only, as a standby. */
  private static void readOnly(EmbeddedPostgresServer server, DatabaseEndpoint as)
      throws SQLException {
    try (Connection c =
            DriverManager.getConnection(
                server.jdbcUrl("postgres"), EmbeddedPostgresServer.SUPERUSER, null);
        Statement s = c.createStatement()) {
      if (!as.username().equals(EmbeddedPostgresServer.SUPERUSER)) {
        s.execute(
            "CREATE ROLE "
                + TableName.quote(as.username())
                + " LOGIN SUPERUSER"
                + (as.password() == null
                    ? ""
                    : " PASSWORD '" + as.password().replace("'", "''") + "'"));
      }
      s.execute(
          "ALTER DATABASE "
              + TableName.quote(as.databaseName())
              + " SET default_transaction_read_only = on");
    }
  }

  @Test
  void should_read_the_rows_tables_named_with_regex_characters_held_before_capture()
      throws Exception {
    List<String> names = List.of("Events+EU", "a,b", "audit$events");
    for (String name : names) {
      TestSql.exec(
          ds,
          "CREATE TABLE " + table(name).quoted() + " (id bigint PRIMARY KEY, v text)",
          "INSERT INTO " + table(name).quoted() + " SELECT g, 'v' FROM generate_series(1, 3) g");
    }
    CaptureRoute[] routes =
        names.stream()
            .map(n -> new CaptureRoute(DB, table(n), ChangeKind.INSERT, topics.bufferEvents("b")))
            .toArray(CaptureRoute[]::new);

    try (Capture capture = start(routes)) {
      List<ConsumerRecord<byte[], byte[]>> read =
          TopicReader.readAtLeast(
              infra().bootstrapServers(), topics.bufferEvents("b"), 3 * names.size(), TIMEOUT);
      assertThat(read)
          .extracting(r -> EventSerdes.decodeBufferEvent(r.value()))
          .extracting(e -> e.table().toString() + "#" + e.row().get("id"))
          .containsExactlyInAnyOrderElementsOf(
              names.stream()
                  .flatMap(n -> Stream.of(1, 2, 3).map(id -> table(n).toString() + "#" + id))
                  .toList());
    }
  }

  @Test
  void
      should_refuse_rows_from_before_capture_in_a_table_debezium_cannot_name_and_publish_nothing() {
    TableName dotted = table("x.y");
    TestSql.exec(
        ds,
        "CREATE TABLE " + dotted.quoted() + " (id bigint PRIMARY KEY, v text)",
        "INSERT INTO " + dotted.quoted() + " VALUES (1, 'v')");

    assertThatThrownBy(
            () -> start(new CaptureRoute(DB, dotted, ChangeKind.INSERT, topics.bufferEvents("b"))))
        .isInstanceOf(CaptureSetupException.class)
        .hasMessage(
            "Table "
                + dotted
                + " holds rows from before capture could read it, and Debezium cannot be asked to"
                + " read a table whose name has a dot, a space or a quote; rename the table, or"
                + " move its rows out and insert them again once Spillway runs.");
    assertThat(
            TestSql.count(
                ds,
                "SELECT count(*) FROM pg_publication_tables WHERE schemaname = '"
                    + schema
                    + "' AND tablename = 'x.y'"))
        .as("the publication is left as it was")
        .isZero();
    assertThat(
            TestSql.count(
                ds,
                "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '"
                    + settings.slotName(DB)
                    + "'"))
        .as("the slot this start made is dropped again")
        .isZero();
  }

  @Test
  void should_resume_after_restart_with_nothing_lost_and_only_the_last_insert_again()
      throws Exception {
    TestSql.exec(ds, "CREATE TABLE " + schema + ".events (id bigint PRIMARY KEY, v text)");
    CaptureRoute inserts = inserts("events");
    String topic = topics.bufferEvents("events");
    // A writer commits 100 rows at a time until capture has stopped (20,000 at most), so the stop
    // comes while changes stream in, then 1,000 more while capture is down: kept by the slot.
    AtomicBoolean stopped = new AtomicBoolean();
    CompletableFuture<Integer> writer;
    try (Capture capture = start(inserts)) {
      writer =
          CompletableFuture.supplyAsync(
              () -> {
                int rows = 0;
                while (!stopped.get() && rows < 20_000) {
                  insertRange(rows + 1, rows + 100);
                  rows += 100;
                }
                insertRange(rows + 1, rows + 1000);
                return rows + 1000;
              });
      TopicReader.readAtLeast(infra().bootstrapServers(), topic, 1, TIMEOUT);
    }
    stopped.set(true);
    int written = writer.get(TIMEOUT.toSeconds(), TimeUnit.SECONDS);
    int last = written + 1000;
    try (Capture capture = start(inserts)) {
      insertRange(written + 1, last);
      List<ConsumerRecord<byte[], byte[]>> all =
          TopicReader.readUntil(
              infra().bootstrapServers(),
              topic,
              read -> ids(read).contains((long) last), // one partition per table: it comes last
              TIMEOUT);
      Set<Long> distinct = ids(all);
      assertThat(distinct.size()).as("distinct changes").isEqualTo(last);
      // Each insert has a position of its own: only the last handed over before the stop, whose
      // position a later change could have shared, was left unacknowledged.
      assertThat(all.size())
          .as("no change published twice but the last one before the stop")
          .isBetween(last, last + 1);
    }
  }

  /**
   * COPY writes the rows of a page in one WAL record, all at one position: a stop after a batch
   * that ended within them must not take the rest for published.
   */
  @Test
  void should_lose_none_of_the_rows_a_copy_wrote_at_one_position_when_stopped_within_them()
      throws Exception {
    TestSql.exec(ds, "CREATE TABLE " + schema + ".events (id bigint PRIMARY KEY, v text)");
    CaptureRoute inserts = inserts("events");
    String topic = topics.bufferEvents("events");
    settings =
        new CaptureSettings(
            settings.bootstrapServers(),
            topics,
            settings.partitions(),
            settings.replicationFactor(),
            settings.kafkaProperties(),
            settings.pollInterval(),
            settings.heartbeatInterval(),
            7, // batches ending within a page's rows
            Duration.ofMillis(1));
    int rows = 5000;
    StringBuilder copied = new StringBuilder();
    for (int id = 1; id <= rows; id++) {
      copied.append(id).append("\tv\n");
    }
    try (Capture capture = start(inserts)) {
      try (Connection c = ds.getConnection()) {
        c.unwrap(org.postgresql.PGConnection.class)
            .getCopyAPI()
            .copyIn(
                "COPY " + schema + ".events (id, v) FROM STDIN",
                new java.io.StringReader(copied.toString()));
      }
      TopicReader.readAtLeast(infra().bootstrapServers(), topic, 300, TIMEOUT);
    }
    try (Capture capture = start(inserts)) {
      List<ConsumerRecord<byte[], byte[]>> all =
          TopicReader.readUntil(
              infra().bootstrapServers(), topic, read -> ids(read).size() == rows, TIMEOUT);
      assertThat(ids(all)).as("every row copied").hasSize(rows);
    }
  }

  @Test
  void should_read_once_the_rows_a_buffer_table_held_before_capture_began() throws Exception {
    TestSql.exec(ds, "CREATE TABLE " + schema + ".events (id bigint PRIMARY KEY, v text)");
    insertRange(1, 2500); // before the slot exists: in no WAL capture will read
    CaptureRoute inserts = inserts("events");
    String topic = topics.bufferEvents("events");

    try (Capture capture = start(inserts)) {
      insertRange(2501, 2600);
      List<ConsumerRecord<byte[], byte[]>> read =
          TopicReader.readUntil(
              infra().bootstrapServers(), topic, r -> ids(r).size() == 2600, TIMEOUT);
      List<BufferEvent> events =
          read.stream().map(r -> EventSerdes.decodeBufferEvent(r.value())).toList();
      List<BufferEvent> snapshot =
          events.stream().filter(e -> (Long) e.row().get("id") <= 2500).toList();
      // Rows inserted while it reads may come twice (their insert, and the read of a chunk).
      assertThat(snapshot).as("each row that was there once").hasSize(2500);
      assertThat(snapshot).allSatisfy(e -> assertThat(e.row()).containsEntry("v", "v"));
      assertThat(snapshot)
          .as("positions of reads: negative, one per row")
          .allSatisfy(e -> assertThat(e.lsn()).isNegative())
          .allSatisfy(e -> assertThat(e.txId()).as("visible when read").isZero())
          .extracting(BufferEvent::lsn)
          .doesNotHaveDuplicates();
    }
    int before =
        TopicReader.readUntil(
                infra().bootstrapServers(), topic, r -> ids(r).size() == 2600, TIMEOUT)
            .size();
    try (Capture capture = start(inserts)) {
      insertRange(2601, 2601);
      List<ConsumerRecord<byte[], byte[]>> read =
          TopicReader.readUntil(
              infra().bootstrapServers(), topic, r -> ids(r).contains(2601L), TIMEOUT);
      assertThat(read).as("no second snapshot after a restart").hasSize(before + 1);
    }
  }

  @Test
  void should_leave_another_installation_on_the_same_database_out_of_its_snapshots()
      throws Exception {
    TestSql.exec(ds, "CREATE TABLE " + schema + ".events (id bigint PRIMARY KEY, v text)");
    String topic = topics.bufferEvents("events");
    Topics others = new Topics(topics.prefix() + "o");
    CaptureSettings otherSettings = with(others, settings.heartbeatInterval());
    String othersTopic = others.bufferEvents("events");
    // The other installation's process names the database its own way (one process runs one
    // engine per database name).
    var endpoint = databases.endpoint(DB);
    try (Databases twin =
            new Databases(
                List.of(
                    new dev.spillway.jdbc.DatabaseEndpoint(
                        "twin",
                        endpoint.url(),
                        endpoint.username(),
                        endpoint.password(),
                        2,
                        endpoint.lockTimeout())),
                new SimpleMeterRegistry());
        Capture capture = start(inserts("events"));
        Capture other =
            Capture.start(
                new CapturePlan(
                    List.of(
                        new CaptureRoute("twin", table("events"), ChangeKind.INSERT, othersTopic))),
                twin,
                otherSettings,
                new CaptureStats(new SimpleMeterRegistry()),
                Clock.systemUTC(),
                Capture.SLOT_CHECK_INTERVAL)) {
      insertRange(1, 1);
      TopicReader.readAtLeast(infra().bootstrapServers(), othersTopic, 1, TIMEOUT);

      assertThat(Capture.readAgain(ds, DB, settings.slotName(DB), List.of(table("events"))))
          .isEqualTo(Capture.ReadAgain.ASKED);
      TopicReader.readUntil(
          infra().bootstrapServers(),
          topic,
          r -> r.stream().anyMatch(e -> EventSerdes.decodeBufferEvent(e.value()).lsn() < 0),
          TIMEOUT);
      // The other's snapshot, were it to run one, would read the row within a few seconds.
      await()
          .during(Duration.ofSeconds(3))
          .atMost(TIMEOUT)
          .until(
              () ->
                  TopicReader.readUntil(
                          infra().bootstrapServers(),
                          othersTopic,
                          r -> ids(r).contains(1L),
                          TIMEOUT)
                      .stream()
                      .noneMatch(e -> EventSerdes.decodeBufferEvent(e.value()).lsn() < 0));
      insertRange(2, 2);
      List<ConsumerRecord<byte[], byte[]>> othersRead =
          TopicReader.readUntil(
              infra().bootstrapServers(), othersTopic, r -> ids(r).contains(2L), TIMEOUT);
      assertThat(othersRead)
          .as("the other installation's events: the two inserts, no read")
          .extracting(r -> EventSerdes.decodeBufferEvent(r.value()).lsn())
          .hasSize(2)
          .allSatisfy(lsn -> assertThat(lsn).isPositive());
    } finally {
      TestSql.dropCapture(ds, otherSettings.slotName("twin"));
    }
  }

  @Test
  void should_not_hold_inserts_into_a_buffer_table_while_start_up_waits_for_another_table()
      throws Exception {
    TestSql.exec(
        ds,
        "CREATE TABLE " + schema + ".events (id bigint PRIMARY KEY, v text)",
        "CREATE TABLE " + schema + ".projects (id bigint PRIMARY KEY)");
    CaptureRoute deletes = deletes("projects");
    // A vacuum or an index built concurrently on a captured table: publishing it waits for it.
    try (Connection vacuum =
        TestSql.inTransaction(
            ds, "LOCK TABLE " + schema + ".projects IN SHARE UPDATE EXCLUSIVE MODE")) {
      CompletableFuture<Capture> starting =
          CompletableFuture.supplyAsync(
              () -> {
                try {
                  return start(inserts("events"), deletes);
                } catch (InterruptedException e) {
                  throw new CompletionException(e);
                }
              });
      try {
        // Start-up waiting for the lock the vacuum holds on the captured table.
        TestSql.awaitBlockedBy(ds, TestSql.pid(vacuum));
        try (Connection app = ds.getConnection();
            Statement st = app.createStatement()) {
          st.execute("SET statement_timeout = '5s'");
          st.execute("INSERT INTO " + schema + ".events VALUES (1, 'while start-up waits')");
        }
      } finally {
        vacuum.rollback();
      }
      try (Capture capture = starting.get(TIMEOUT.toSeconds(), TimeUnit.SECONDS)) {
        awaitEvent(1);
      }
    }
  }

  @Test
  void
      should_make_its_publication_while_another_installation_prepares_longer_than_the_lock_timeout()
          throws Exception {
    TestSql.exec(ds, "CREATE TABLE " + schema + ".events (id bigint PRIMARY KEY, v text)");
    TestSql.exec(ds, CaptureStatements.CREATE_SCHEMA, CaptureStatements.CREATE_HEARTBEAT);
    // Another installation's start-up holds the heartbeat table all installations share, as
    // changing its publication does, past the pool's 2 s lock timeout.
    try (Connection other =
        TestSql.inTransaction(
            ds,
            "LOCK TABLE "
                + CaptureStatements.HEARTBEAT_TABLE
                + " IN SHARE UPDATE EXCLUSIVE MODE")) {
      startPastTheLockTimeout(other, "CREATE PUBLICATION");
    }
  }

  @Test
  void should_make_its_slot_while_a_transaction_runs_longer_than_the_lock_timeout()
      throws Exception {
    TestSql.exec(ds, "CREATE TABLE " + schema + ".events (id bigint PRIMARY KEY, v text)");
    // Making a slot waits for every transaction running then; the pool's lock timeout is 2 s.
    try (Connection writer =
        TestSql.inTransaction(ds, "INSERT INTO " + schema + ".events VALUES (0, 'open')")) {
      startPastTheLockTimeout(writer, "SELECT pg_create_logical_replication_slot");
    }
  }

  /**
   * Starts capture of {@code events} while {@code held}'s transaction holds what the start-up
   * statement beginning with {@code waiting} needs, ending it once that statement has waited past
   * the pool's 2 s lock timeout; then a row inserted streams.
   */
  private void startPastTheLockTimeout(Connection held, String waiting) throws Exception {
    CompletableFuture<Void> endLater =
        CompletableFuture.runAsync(
            () -> {
              await()
                  .atMost(TIMEOUT)
                  .alias(waiting + " waiting past 2.5 s")
                  .until(
                      () ->
                          TestSql.sessions(
                                  ds,
                                  waiting,
                                  "wait_event_type = 'Lock'"
                                      + " AND clock_timestamp() - query_start"
                                      + " > interval '2.5 s'")
                              == 1);
              try {
                held.commit();
              } catch (SQLException e) {
                throw new CompletionException(e);
              }
            });
    try (Capture capture = start(inserts("events"))) {
      endLater.join();
      insertRange(1, 1);
      awaitEvent(1);
    }
  }

  @Test
  void should_read_the_rows_a_table_got_before_it_joined_a_running_capture() throws Exception {
    TestSql.exec(
        ds,
        "CREATE TABLE " + schema + ".events (id bigint PRIMARY KEY, v text)",
        "CREATE TABLE " + schema + ".later (id bigint PRIMARY KEY, v text)");
    CaptureRoute events = inserts("events");
    CaptureRoute later = inserts("later");
    try (Capture capture = start(events)) {
      TestSql.exec(ds, "INSERT INTO " + schema + ".events VALUES (1, 'e')");
      TopicReader.readAtLeast(
          infra().bootstrapServers(), topics.bufferEvents("events"), 1, TIMEOUT);
    }
    // Committed after the slot's position but while the table was not published: the stream
    // will never carry them.
    TestSql.exec(ds, "INSERT INTO " + schema + ".later SELECT g, 'l' FROM generate_series(1, 3) g");

    try (Capture capture = start(events, later)) {
      TestSql.exec(ds, "INSERT INTO " + schema + ".later VALUES (4, 'l')");
      List<ConsumerRecord<byte[], byte[]>> read =
          TopicReader.readUntil(
              infra().bootstrapServers(),
              topics.bufferEvents("later"),
              r -> ids(r).size() == 4,
              TIMEOUT);
      assertThat(ids(read)).containsExactlyInAnyOrder(1L, 2L, 3L, 4L);
      assertThat(
              read.stream()
                  .map(r -> EventSerdes.decodeBufferEvent(r.value()).row().get("id"))
                  .filter(id -> (Long) id <= 3))
          .as("each row that was there once")
          .hasSize(3);
    }
  }

  @Test
  @Timeout(120) // waiting for the lock without end would hold start-up, and this test, for ever
  void should_not_wait_on_an_open_insert_to_a_table_it_starts_capturing_and_read_it_once_committed()
      throws Exception {
    try (Connection open = insertOpenIntoEventsNotCapturedYet()) {
      // The table cannot be locked against inserts while this is open: capture starts anyway,
      // and reads the table once the transaction has ended. Its slot checked every 50 ms, which
      // must not take the table waiting to join for one that left the publication.
      try (Capture capture =
          start(
              Duration.ofMillis(50),
              new SimpleMeterRegistry(),
              inserts("events"),
              inserts("other"))) {
        streamedPastItsStart(1);
        streamedPastItsStart(2);
        open.commit();
        assertEventsReadWithOneInsertedNow();
      }
    }
  }

  @Test
  @Timeout(120)
  void should_read_at_the_next_start_a_row_an_insert_open_at_its_start_committed_after_a_stop()
      throws Exception {
    try (Connection open = insertOpenIntoEventsNotCapturedYet()) {
      try (Capture capture = start(inserts("events"), inserts("other"))) {
        streamedPastItsStart(1);
      } // stopped while the insert is still open
      open.commit();
    }

    try (Capture capture = start(inserts("events"), inserts("other"))) {
      assertEventsReadWithOneInsertedNow();
    }
  }

  @Test
  @Timeout(120)
  void
      should_keep_a_table_published_for_its_deletes_streaming_them_while_an_insert_into_it_is_open()
          throws Exception {
    CaptureRoute deletes = deletes("events");
    try (Connection open = insertOpenIntoEventsPublishedForItsDeletes()) {
      // A buffer joins the table: it cannot be locked, yet it stays published for its deletes.
      try (Capture capture = start(deletes, inserts("events"))) {
        TestSql.exec(ds, "DELETE FROM " + schema + ".events WHERE id = 0");
        assertThat(
                TopicReader.readAtLeast(
                    infra().bootstrapServers(), topics.deletedRecords(), 1, TIMEOUT))
            .as("the delete, streamed while the insert is still open")
            .hasSize(1);
      }
      open.rollback();
    }
  }

  @Test
  @Timeout(120)
  void should_capture_an_insert_into_a_parent_gaining_a_buffer_open_across_the_start()
      throws Exception {
    CaptureRoute deletes = deletes("events");
    try (Connection open = insertOpenIntoEventsPublishedForItsDeletes()) {
      // Row 1 is written before the publication takes inserts, and committed after the table's
      // snapshot read: PostgreSQL still streams it, the publication's change reaching the
      // transaction in progress.
      try (Capture capture = start(deletes, inserts("events"))) {
        TestSql.exec(ds, "INSERT INTO " + schema + ".events VALUES (2, 'after')");
        TopicReader.readUntil(
            infra().bootstrapServers(),
            topics.bufferEvents("events"),
            r -> ids(r).contains(2L),
            TIMEOUT);
        open.commit();
        List<ConsumerRecord<byte[], byte[]>> read =
            TopicReader.readUntil(
                infra().bootstrapServers(),
                topics.bufferEvents("events"),
                r -> ids(r).containsAll(List.of(0L, 1L, 2L)),
                TIMEOUT);
        assertThat(ids(read)).as("row 1, captured once it committed").contains(0L, 1L, 2L);
      }
    }
  }

  /**
   * Table {@code events} holding row 0, published for its deletes only by a capture of them, and a
   * transaction left open that inserted row 1 into it.
   */
  private Connection insertOpenIntoEventsPublishedForItsDeletes() throws Exception {
    TestSql.exec(
        ds,
        "CREATE TABLE " + schema + ".events (id bigint PRIMARY KEY, v text)",
        "INSERT INTO " + schema + ".events VALUES (0, 'before')");
    try (Capture first = start(deletes("events"))) {
      // published for its deletes only
    }
    return TestSql.inTransaction(ds, "INSERT INTO " + schema + ".events VALUES (1, 'open')");
  }

  /**
   * Tables {@code events} and {@code other}, the slot made by a capture of {@code other}, and a
   * transaction left open that inserted row 1 into {@code events}.
   */
  private Connection insertOpenIntoEventsNotCapturedYet() throws Exception {
    TestSql.exec(
        ds,
        "CREATE TABLE " + schema + ".events (id bigint PRIMARY KEY, v text)",
        "CREATE TABLE " + schema + ".other (id bigint PRIMARY KEY)");
    try (Capture first = start(inserts("other"))) {
      // the slot exists from here on (creating one waits for every open transaction to end)
    }
    return TestSql.inTransaction(ds, "INSERT INTO " + schema + ".events VALUES (1, 'open')");
  }

  /** Inserts row {@code n} into {@code other} and waits for it: capture streamed past its start. */
  private void streamedPastItsStart(int n) {
    TestSql.exec(ds, "INSERT INTO " + schema + ".other VALUES (" + n + ")");
    TopicReader.readAtLeast(infra().bootstrapServers(), topics.bufferEvents("other"), n, TIMEOUT);
  }

  /** Inserts row 2 into {@code events} and asserts both its rows are captured. */
  private void assertEventsReadWithOneInsertedNow() {
    TestSql.exec(ds, "INSERT INTO " + schema + ".events VALUES (2, 'after')");
    List<ConsumerRecord<byte[], byte[]>> read =
        TopicReader.readUntil(
            infra().bootstrapServers(),
            topics.bufferEvents("events"),
            r -> ids(r).size() == 2,
            TIMEOUT);
    assertThat(ids(read)).containsExactlyInAnyOrder(1L, 2L);
  }

  @Test
  void should_dead_letter_the_key_of_a_row_too_large_for_kafka_and_go_on() throws Exception {
    TestSql.exec(ds, "CREATE TABLE " + schema + ".events (id bigint PRIMARY KEY, v text)");
    CaptureRoute inserts = inserts("events");
    ch.qos.logback.classic.Logger mapper =
        (ch.qos.logback.classic.Logger) org.slf4j.LoggerFactory.getLogger(ChangeMapper.class);
    ch.qos.logback.core.read.ListAppender<ch.qos.logback.classic.spi.ILoggingEvent> logged =
        new ch.qos.logback.core.read.ListAppender<>();
    logged.start();
    mapper.addAppender(logged);
    try (Capture capture = start(inserts)) {
      TestSql.exec(
          ds,
          // 2 MB of text that does not compress: as an event, larger than a Kafka record
          "INSERT INTO "
              + schema
              + ".events SELECT 1, string_agg(md5(g::text), '') FROM generate_series(1, 62500) g",
          "INSERT INTO " + schema + ".events VALUES (2, 'small')");

      List<ConsumerRecord<byte[], byte[]>> read =
          TopicReader.readAtLeast(
              infra().bootstrapServers(), topics.bufferEvents("events"), 1, TIMEOUT);
      assertThat(ids(read)).as("capture goes on past it").containsExactly(2L);
      ConsumerRecord<byte[], byte[]> dead =
          TopicReader.readAtLeast(
                  infra().bootstrapServers(), topics.dlq(Pipeline.BUFFERS), 1, TIMEOUT)
              .get(0);
      assertThat(EventSerdes.decodeBufferEvent(dead.value()).row())
          .as("its key alone")
          .isEqualTo(Map.of("id", 1L));
      assertThat(SinkHeaders.text(dead.headers().lastHeader(SinkHeaders.ERROR_MESSAGE).value()))
          .startsWith("the row id=1 of " + schema + ".events is 2,000,0")
          .endsWith(
              "bytes as an event, more than the 983,040 one Kafka record carries here; it stays"
                  + " in the table: handle it outside Spillway, or make it smaller and insert it"
                  + " anew");
      assertThat(capture.failure()).isEmpty();
      assertThat(logged.list)
          .as("a warning names the row and where it went")
          .anyMatch(
              e ->
                  e.getLevel() == ch.qos.logback.classic.Level.WARN
                      && e.getFormattedMessage()
                          .startsWith(
                              "Dead-lettered to "
                                  + topics.dlq(Pipeline.BUFFERS)
                                  + ": the row id=1 of "
                                  + schema
                                  + ".events is 2,000,0"));
    } finally {
      mapper.detachAppender(logged);
    }
  }

  @Test
  void should_publish_only_the_kinds_of_change_its_routes_read() throws Exception {
    TestSql.exec(
        ds,
        "CREATE TABLE " + schema + ".projects (id bigint PRIMARY KEY)",
        "CREATE TABLE " + schema + ".events (id bigint PRIMARY KEY)");
    CaptureRoute deletes = deletes("projects");
    CaptureRoute inserts = inserts("events");

    try (Capture capture = start(inserts)) {
      assertThat(publishedActions()).isEqualTo("insert");
    }
    try (Capture capture = start(inserts, deletes)) {
      assertThat(publishedActions()).isEqualTo("insert, delete");
    }
    try (Capture capture = start(deletes)) {
      assertThat(publishedActions()).isEqualTo("delete");
    }
  }

  @Test
  void should_stand_by_while_another_instance_streams_from_the_slot_and_take_over_once_it_stops()
      throws Exception {
    TestSql.exec(
        ds,
        "CREATE TABLE " + schema + ".projects (id bigint PRIMARY KEY)",
        "CREATE TABLE " + schema + ".events (id bigint PRIMARY KEY)",
        "INSERT INTO " + schema + ".projects VALUES (7)");
    CaptureRoute inserts = inserts("events");
    CaptureRoute deletes = deletes("projects");
    SimpleMeterRegistry metrics = new SimpleMeterRegistry();

    Capture first = start(inserts);
    try (Capture second = start(Duration.ofMillis(200), metrics, deletes)) {
      assertThat(second.standingBy()).containsOnlyKeys(DB);
      assertThat(streaming(metrics)).isZero();
      assertThat(publishedActions())
          .as("the first one's publication, untouched")
          .isEqualTo("insert");
      TestSql.exec(ds, "INSERT INTO " + schema + ".events VALUES (1)");
      assertThat(
              TopicReader.readAtLeast(
                  infra().bootstrapServers(), topics.bufferEvents("events"), 1, TIMEOUT))
          .as("captured by the first")
          .hasSize(1);

      first.close(); // the instance streaming from the slot stops: the second takes over

      await().atMost(TIMEOUT).until(() -> second.standingBy().isEmpty());
      assertThat(streaming(metrics)).isEqualTo(1);
      assertThat(second.failure()).isEmpty();
      assertThat(publishedActions()).as("the second one's publication").isEqualTo("delete");
      TestSql.exec(ds, "DELETE FROM " + schema + ".projects WHERE id = 7");
      assertThat(
              TopicReader.readAtLeast(
                  infra().bootstrapServers(), topics.deletedRecords(), 1, TIMEOUT))
          .as("captured by the second")
          .hasSize(1);
    } finally {
      first.close();
    }
  }

  @Test
  void should_stop_at_once_a_take_over_the_database_refuses_as_it_would_refuse_a_start()
      throws Exception {
    TestSql.exec(
        ds,
        "CREATE TABLE " + schema + ".projects (id bigint PRIMARY KEY)",
        "CREATE TABLE " + schema + ".events (id bigint PRIMARY KEY)");
    CaptureRoute deletes = deletes("projects");
    Capture first = start(inserts("events"));
    try (Capture second = start(Duration.ofMillis(200), new SimpleMeterRegistry(), deletes)) {
      assertThat(second.standingBy()).containsOnlyKeys(DB);
      // Dropped while the second stood by: its take-over's statements name a table no longer
      // there, which no further try mends.
      TestSql.exec(ds, "DROP TABLE " + schema + ".projects");
      first.close();

      await().atMost(Duration.ofSeconds(20)).until(() -> second.failure().isPresent());
      assertThat(second.refusal())
          .as("a refusal, exit 2, not a failure tried three times, exit 1")
          .isPresent();
      assertThat(second.failure().get())
          .startsWith("Capture of database " + DB + " could not take over: ")
          .contains("projects");
    } finally {
      first.close();
    }
  }

  @Test
  void should_take_over_at_once_from_an_instance_that_stopped_but_not_from_one_reconnecting()
      throws Exception {
    TestSql.exec(ds, "CREATE TABLE " + schema + ".events (id bigint PRIMARY KEY, v text)");
    String topic = topics.bufferEvents("events");
    // An instance stops with none standing by: the mark it leaves is the next one's to take back.
    start(inserts("events")).close();
    // The others' clock never moves: a slot idle for 15 s, the sign of an instance that died,
    // never is.
    Clock frozen = new SettableClock(Instant.parse("2026-01-01T00:00:00Z"));
    Capture first = start(inserts("events"));
    try (Capture second =
            start(Duration.ofMillis(200), new SimpleMeterRegistry(), frozen, inserts("events"));
        Capture third =
            start(Duration.ofMillis(200), new SimpleMeterRegistry(), frozen, inserts("events"))) {
      assertThat(second.standingBy()).containsOnlyKeys(DB);
      assertThat(third.standingBy()).containsOnlyKeys(DB);
      // A mark written late, after the first began to stream, by an instance that stopped: the
      // first takes it back at its next slot check.
      TestSql.exec(
          ds,
          "INSERT INTO spillway.capture_release VALUES ('" + settings.slotName(DB) + "', now())");
      await()
          .atMost(TIMEOUT)
          .until(
              () ->
                  TestSql.text(
                          ds,
                          "SELECT count(*)::text FROM spillway.capture_release WHERE slot = '"
                              + settings.slotName(DB)
                              + "'")
                      .equals("0"));

      // The server ends the first one's stream: it reconnects 10 s later and keeps its slot.
      endSender(settings.slotName(DB));
      insertRange(1, 1);
      awaitEvent(1);
      assertThat(first.failure()).isEmpty();
      assertThat(second.standingBy()).as("still standing by").containsOnlyKeys(DB);
      assertThat(third.standingBy()).as("still standing by").containsOnlyKeys(DB);

      first.close(); // stops and lets the slot go: one of the others takes over at its next look

      await()
          .atMost(TIMEOUT)
          .until(() -> second.standingBy().isEmpty() || third.standingBy().isEmpty());
      Capture other = second.standingBy().isEmpty() ? third : second;
      insertRange(2, 2);
      TopicReader.readUntil(infra().bootstrapServers(), topic, r -> ids(r).contains(2L), TIMEOUT);
      assertThat(other.standingBy()).as("the other stands by on").containsOnlyKeys(DB);
      assertThat(second.failure()).isEmpty();
      assertThat(third.failure()).isEmpty();
    } finally {
      first.close();
    }
  }

  @Test
  void should_let_one_of_two_instances_starting_at_once_stream_and_the_other_stand_by()
      throws Exception {
    TestSql.exec(ds, "CREATE TABLE " + schema + ".events (id bigint PRIMARY KEY, v text)");
    // Twice: both find no slot (the installation's first start), then both find it made.
    for (long round = 1; round <= 2; round++) {
      List<Capture> both = startedAtOnce(2, inserts("events"));
      try {
        assertThat(both).filteredOn(c -> c.standingBy().isEmpty()).as("streaming").hasSize(1);
        assertThat(both)
            .filteredOn(c -> c.standingBy().containsKey(DB))
            .as("standing by")
            .hasSize(1);
        insertRange((int) round, (int) round);
        long id = round;
        TopicReader.readUntil(
            infra().bootstrapServers(),
            topics.bufferEvents("events"),
            r -> ids(r).contains(id),
            TIMEOUT);
        assertThat(both).allSatisfy(c -> assertThat(c.failure()).isEmpty());
      } finally {
        both.forEach(Capture::close);
      }
    }
  }

  @Test
  void should_stand_by_once_another_instance_took_its_slot_while_it_reconnected() throws Exception {
    TestSql.exec(ds, "CREATE TABLE " + schema + ".events (id bigint PRIMARY KEY, v text)");
    String topic = topics.bufferEvents("events");
    settings = withHeartbeat(Duration.ofSeconds(1)); // nothing for 17 s: the stream is not its own
    Duration quiet = CaptureEngine.quiet(settings.heartbeatInterval());
    SettableClock clock = new SettableClock(Instant.parse("2026-01-01T00:00:00Z"));
    DatabaseEndpoint direct = databases.endpoint(DB);
    try (TcpProxy relay = new TcpProxy(direct.host(), direct.port());
        Databases relayed =
            new Databases(List.of(relay.relaying(direct, 2)), new SimpleMeterRegistry())) {
      SimpleMeterRegistry firstMetrics = new SimpleMeterRegistry();
      Capture first = start(relayed, Clock.systemUTC(), firstMetrics, inserts("events"));
      Supplier<Double> firstHeld =
          () -> firstMetrics.get("spillway_capture_slot_wal_held_bytes").gauge().value();
      try (Capture second =
          start(Duration.ofMillis(200), new SimpleMeterRegistry(), clock, inserts("events"))) {
        assertThat(second.standingBy()).containsOnlyKeys(DB);
        await().atMost(TIMEOUT).until(() -> !firstHeld.get().isNaN());
        // Nothing inserted for longer than that: the first's heartbeats say it streams.
        await()
            .during(quiet.plusSeconds(5))
            .atMost(quiet.plusSeconds(10))
            .until(() -> first.standingBy().isEmpty() && second.standingBy().containsKey(DB));

        // The first one's network cut: the server ends its stream, and the second takes over.
        relay.cut();
        tookOver(second, clock);
        insertRange(1, 1);
        awaitEvent(1);

        // Back, the first one's engine is refused the slot: once it has had nothing for 17 s, it
        // stands by, not failed.
        relay.open();
        await().atMost(TIMEOUT).until(() -> first.standingBy().containsKey(DB));
        assertThat(first.failure()).isEmpty();
        assertThat(second.failure()).isEmpty();
        assertThat(firstHeld.get()).as("the slot's WAL, unknown to one standing by").isNaN();

        second.close(); // lets the slot go: the first takes it over again
        await().atMost(TIMEOUT).until(() -> first.standingBy().isEmpty());
        insertRange(2, 2);
        TopicReader.readUntil(infra().bootstrapServers(), topic, r -> ids(r).contains(2L), TIMEOUT);
        assertThat(first.failure()).isEmpty();
      } finally {
        first.close();
      }
    }
  }

  @Test
  void should_keep_streaming_after_its_database_was_out_of_reach_longer_than_a_silent_stream_lasts()
      throws Exception {
    TestSql.exec(ds, "CREATE TABLE " + schema + ".events (id bigint PRIMARY KEY, v text)");
    String topic = topics.bufferEvents("events");
    // A heartbeat every 4 s, the first one 4 s after Debezium reconnects: nothing for 23 s.
    settings = withHeartbeat(Duration.ofSeconds(4));
    Duration quiet = CaptureEngine.quiet(settings.heartbeatInterval());
    DatabaseEndpoint direct = databases.endpoint(DB);
    try (TcpProxy relay = new TcpProxy(direct.host(), direct.port());
        Databases relayed =
            new Databases(List.of(relay.relaying(direct, 2)), new SimpleMeterRegistry());
        Capture capture = start(relayed, Clock.systemUTC(), inserts("events"))) {
      insertRange(1, 1);
      awaitEvent(1);

      relay.cut(); // a server restart, say, longer than a stream goes without a batch
      await()
          .during(quiet.plusSeconds(8))
          .atMost(quiet.plusSeconds(10))
          .until(() -> capture.failure().isEmpty());
      relay.open();

      // It reconnects within 10 s, and its own stream is silent until the first heartbeat: it
      // does not stand by for it.
      await()
          .during(CaptureEngine.RECONNECT_WAIT.plus(quiet))
          .atMost(CaptureEngine.RECONNECT_WAIT.plus(quiet).plusSeconds(5))
          .until(() -> capture.standingBy().isEmpty() && capture.failure().isEmpty());
      insertRange(2, 2);
      TopicReader.readUntil(infra().bootstrapServers(), topic, r -> ids(r).contains(2L), TIMEOUT);
    }
  }

  private CaptureSettings withHeartbeat(Duration heartbeat) {
    return with(topics, heartbeat);
  }

  /** These settings with other topics (another installation's) and heartbeat interval. */
  private CaptureSettings with(Topics topics, Duration heartbeat) {
    return new CaptureSettings(
        settings.bootstrapServers(),
        topics,
        settings.partitions(),
        settings.replicationFactor(),
        settings.kafkaProperties(),
        settings.pollInterval(),
        heartbeat,
        settings.maxBatchSize(),
        settings.offsetFlushInterval());
  }

  /** A capture of its own of {@code routes} through {@code through}, slots checked every 200 ms. */
  private Capture start(Databases through, Clock clock, CaptureRoute... routes)
      throws InterruptedException {
    return start(through, clock, new SimpleMeterRegistry(), routes);
  }

  private Capture start(
      Databases through, Clock clock, SimpleMeterRegistry metrics, CaptureRoute... routes)
      throws InterruptedException {
    return Capture.start(
        new CapturePlan(List.of(routes)),
        through,
        settings,
        new CaptureStats(metrics),
        clock,
        Duration.ofMillis(200));
  }

  /**
   * Waits until {@code capture} has taken its database over, its clock moved a second on at each
   * look, so the slot's idle time counts.
   */
  private static void tookOver(Capture capture, SettableClock clock) {
    await()
        .atMost(TIMEOUT)
        .until(
            () -> {
              clock.advance(Duration.ofSeconds(1));
              return capture.standingBy().isEmpty();
            });
  }

  /** Starts {@code n} instances of the same plan at the same moment; all are closed on failure. */
  private List<Capture> startedAtOnce(int n, CaptureRoute... routes) throws Exception {
    ExecutorService starting = Executors.newFixedThreadPool(n);
    try {
      CyclicBarrier together = new CyclicBarrier(n);
      List<Future<Capture>> starts = new ArrayList<>();
      for (int i = 0; i < n; i++) {
        starts.add(
            starting.submit(
                () -> {
                  together.await();
                  return start(Duration.ofMillis(200), new SimpleMeterRegistry(), routes);
                }));
      }
      List<Capture> started = new ArrayList<>();
      Exception failed = null;
      for (Future<Capture> s : starts) {
        try {
          started.add(s.get(2, TimeUnit.MINUTES));
        } catch (ExecutionException | TimeoutException e) {
          failed = failed == null ? e : failed;
        }
      }
      if (failed != null) {
        started.forEach(Capture::close);
        throw failed;
      }
      return started;
    } finally {
      starting.shutdownNow();
    }
  }

  @Test
  void should_take_over_a_slot_left_idle_though_its_mark_cannot_be_read() throws Exception {
    TestSql.exec(ds, "CREATE TABLE " + schema + ".events (id bigint PRIMARY KEY, v text)");
    SettableClock clock = new SettableClock(Instant.parse("2026-01-01T00:00:00Z"));
    Capture first = start(inserts("events"));
    try (Capture second =
            start(Duration.ofMillis(200), new SimpleMeterRegistry(), clock, inserts("events"));
        Connection locker = ds.getConnection()) {
      assertThat(second.standingBy()).containsOnlyKeys(DB);
      // The marks' table locked: the first cannot leave a mark, the second's look for one fails
      // at its lock timeout, and the slot must still be taken over once idle long enough.
      locker.setAutoCommit(false);
      try (Statement st = locker.createStatement()) {
        st.execute("LOCK TABLE spillway.capture_release IN ACCESS EXCLUSIVE MODE");
      }
      first.close();
      tookOver(second, clock);
      locker.rollback();
      insertRange(1, 1);
      awaitEvent(1);
      assertThat(second.failure()).isEmpty();
    } finally {
      first.close();
    }
  }

  @Test
  void should_stand_by_on_while_its_database_cannot_be_reached_and_take_over_after()
      throws Exception {
    TestSql.exec(ds, "CREATE TABLE " + schema + ".events (id bigint PRIMARY KEY, v text)");
    DatabaseEndpoint direct = databases.endpoint(DB);
    try (TcpProxy relay = new TcpProxy(direct.host(), direct.port());
        Databases relayed =
            new Databases(List.of(relay.relaying(direct, 2)), new SimpleMeterRegistry())) {
      Capture first = start(inserts("events"));
      try (Capture second = start(relayed, Clock.systemUTC(), inserts("events"))) {
        assertThat(second.standingBy()).containsOnlyKeys(DB);

        // Its database out of reach for longer than a connection's 30 s wait in the pool.
        relay.cut();
        await()
            .during(Duration.ofSeconds(40))
            .atMost(Duration.ofSeconds(45))
            .until(() -> second.failure().isEmpty() && second.standingBy().containsKey(DB));
        relay.open();

        first.close();
        await().atMost(TIMEOUT).until(() -> second.standingBy().isEmpty());
        insertRange(1, 1);
        TopicReader.readAtLeast(
            infra().bootstrapServers(), topics.bufferEvents("events"), 1, TIMEOUT);
        assertThat(second.failure()).isEmpty();
      } finally {
        first.close();
      }
    }
  }

  @Test
  void should_leave_the_slot_to_its_instance_while_that_one_reconnects() throws Exception {
    TestSql.exec(ds, "CREATE TABLE " + schema + ".events (id bigint PRIMARY KEY, v text)");
    String topic = topics.bufferEvents("events");
    SimpleMeterRegistry metrics = new SimpleMeterRegistry();
    try (Capture first = start(inserts("events"));
        Capture second = start(Duration.ofMillis(200), metrics, inserts("events"))) {
      assertThat(second.standingBy()).containsOnlyKeys(DB);

      // The server ends the first one's stream: it reconnects 10 s later, and keeps the slot.
      endSender(settings.slotName(DB));
      insertRange(1, 1);

      TopicReader.readAtLeast(infra().bootstrapServers(), topic, 1, TIMEOUT);
      assertThat(first.failure()).isEmpty();
      assertThat(first.standingBy()).isEmpty();
      assertThat(second.standingBy()).as("still standing by").containsOnlyKeys(DB);
      assertThat(streaming(metrics)).isZero();
    }
  }

  private static double streaming(SimpleMeterRegistry metrics) {
    return metrics.get("spillway_capture_streaming").tag("database", DB).gauge().value();
  }

  @Test
  void should_move_an_idle_slot_forward_whichever_kind_alone_is_published() throws Exception {
    settings = withHeartbeat(Duration.ofMillis(300));
    TestSql.exec(
        ds,
        "CREATE TABLE " + schema + ".projects (id bigint PRIMARY KEY)",
        "CREATE TABLE " + schema + ".events (id bigint PRIMARY KEY)",
        "CREATE TABLE " + schema + ".elsewhere (id bigint PRIMARY KEY)");
    for (CaptureRoute alone : List.of(inserts("events"), deletes("projects"))) {
      try (Capture capture = start(alone)) {
        // Only a table capture ignores changes: the slot must still confirm past them.
        TestSql.exec(
            ds,
            "INSERT INTO " + schema + ".elsewhere SELECT g FROM generate_series(1, 100) g",
            "DELETE FROM " + schema + ".elsewhere");
        String written = TestSql.text(ds, "SELECT pg_current_wal_lsn()::text");
        await()
            .atMost(TIMEOUT)
            .alias("slot confirmed past " + written + " with only " + alone.kind() + " published")
            .until(
                () ->
                    TestSql.count(
                            ds,
                            "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '"
                                + settings.slotName(DB)
                                + "' AND confirmed_flush_lsn >= '"
                                + written
                                + "'::pg_lsn")
                        == 1);
      }
    }
  }

  @Test
  void should_refuse_a_slot_the_server_invalidated_and_say_how_to_start_again() throws Exception {
    TestSql.exec(ds, "CREATE TABLE " + schema + ".events (id bigint PRIMARY KEY, v text)");
    CaptureRoute inserts = inserts("events");
    String slot = settings.slotName(DB);
    try (Capture capture = start(inserts)) {
      insertRange(1, 1);
      TopicReader.readAtLeast(
          infra().bootstrapServers(), topics.bufferEvents("events"), 1, TIMEOUT);
    }
    TestSql.invalidateSlot(ds, slot);
    insertRange(2, 2); // while no slot keeps it: never decoded
    assertThat(SlotState.read(DB, ds))
        .filteredOn(s -> s.slot().equals(slot))
        .singleElement()
        .satisfies(s -> assertThat(s.invalidation()).isEqualTo("wal_removed"))
        .satisfies(s -> assertThat(s.safeBytes()).isNull());

    assertThatThrownBy(() -> start(inserts))
        .isInstanceOf(SlotUnavailableException.class)
        .hasMessage(invalidated(slot));
    assertThat(
            TestSql.count(
                ds, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '" + slot + "'"))
        .as("the slot left for its owner to look at")
        .isEqualTo(1);

    TestSql.exec(ds, "SELECT pg_drop_replication_slot('" + slot + "')");
    Logger engineLog = (Logger) LoggerFactory.getLogger(CaptureEngine.class);
    ListAppender<ILoggingEvent> logged = new ListAppender<>();
    logged.start();
    engineLog.addAppender(logged);
    try (Capture capture = start(inserts)) {
      assertThat(logged.list)
          .extracting(ILoggingEvent::getFormattedMessage)
          .contains(
              "Capture of database capture: replication slot "
                  + slot
                  + " was gone, though its publication exists; made a new one, which starts at"
                  + " the present: rows then in buffer tables are read again, and 'bin/spillway"
                  + " lfk sweep' finds the children of loose-foreign-key parents deleted"
                  + " meanwhile.");
      insertRange(3, 3);
      List<ConsumerRecord<byte[], byte[]>> read =
          TopicReader.readUntil(
              infra().bootstrapServers(),
              topics.bufferEvents("events"),
              r -> ids(r).containsAll(List.of(2L, 3L)),
              TIMEOUT);
      assertThat(ids(read))
          .as("the row inserted while no slot kept it, read again, and a new one streamed")
          .containsAll(List.of(2L, 3L));
    } finally {
      engineLog.detachAppender(logged);
    }
  }

  @Test
  void should_warn_of_a_slot_left_in_a_configured_database_it_no_longer_captures()
      throws Exception {
    TestSql.exec(ds, "CREATE TABLE " + schema + ".events (id bigint PRIMARY KEY, v text)");
    DatabaseEndpoint here = infra().database(DB);
    // A second configured database (the same server's, for the test) whose tables were captured
    // by an earlier configuration: its slot stays.
    DatabaseEndpoint left =
        new DatabaseEndpoint(
            "retired", here.url(), here.username(), here.password(), 1, here.lockTimeout());
    String slot = settings.slotName("retired");
    TestSql.exec(ds, "SELECT pg_create_logical_replication_slot('" + slot + "', 'pgoutput')");
    Logger captureLog = (Logger) LoggerFactory.getLogger(Capture.class);
    ListAppender<ILoggingEvent> logged = new ListAppender<>();
    logged.start();
    captureLog.addAppender(logged);
    try (Databases both = new Databases(List.of(here, left), null);
        Capture capture = start(both, Clock.systemUTC(), inserts("events"))) {
      assertThat(logged.list)
          .extracting(ILoggingEvent::getFormattedMessage)
          .filteredOn(m -> m.startsWith("Database retired holds replication slot " + slot))
          .singleElement()
          .satisfies(
              m ->
                  assertThat(m)
                      .contains("no table of this configuration is captured there")
                      .endsWith(
                          "SELECT pg_drop_replication_slot('"
                              + slot
                              + "'); DROP PUBLICATION "
                              + TableName.quote(slot)
                              + ";"));
      assertThat(logged.list)
          .extracting(ILoggingEvent::getFormattedMessage)
          .noneMatch(m -> m.startsWith("Database " + DB + " holds"));
    } finally {
      captureLog.detachAppender(logged);
      TestSql.exec(ds, "SELECT pg_drop_replication_slot('" + slot + "')");
    }
  }

  @Test
  void should_read_the_buffer_tables_again_after_a_start_that_made_a_slot_ended_before_asking()
      throws Exception {
    TestSql.exec(ds, "CREATE TABLE " + schema + ".events (id bigint PRIMARY KEY, v text)");
    CaptureRoute inserts = inserts("events");
    String slot = settings.slotName(DB);
    try (Capture capture = start(inserts)) {
      insertRange(1, 1);
      TopicReader.readAtLeast(
          infra().bootstrapServers(), topics.bufferEvents("events"), 1, TIMEOUT);
    }
    TestSql.exec(ds, "SELECT pg_drop_replication_slot('" + slot + "')"); // lost
    insertRange(2, 2); // while no slot keeps it: never decoded
    // A start makes the slot anew, as start-up does, then ends (a signal, a crash) before it asks
    // for the rows: the next finds the slot there and the table published.
    try (var producer =
        dev.spillway.event.KafkaClients.producer(
            Map.of(), Map.of(), infra().bootstrapServers(), "test-forget")) {
      CaptureEngine.forgetPositions(settings, producer, DB);
    }
    SourcePreparation.beforeANewSlot(ds, slot);
    SourcePreparation.createSlot(ds, slot);

    try (Capture capture = start(inserts)) {
      List<ConsumerRecord<byte[], byte[]>> read =
          TopicReader.readUntil(
              infra().bootstrapServers(),
              topics.bufferEvents("events"),
              r -> ids(r).contains(2L),
              TIMEOUT);
      assertThat(ids(read)).as("the row inserted while no slot kept it").contains(2L);
    }
    assertThat(
            TestSql.count(
                ds, "SELECT count(*) FROM spillway.capture_reread WHERE slot = '" + slot + "'"))
        .as("asked for: the next start reads nothing again")
        .isZero();
  }

  @Test
  void should_read_how_much_more_wal_a_slot_may_hold_before_the_server_invalidates_it()
      throws Exception {
    TestSql.exec(ds, "CREATE TABLE " + schema + ".events (id bigint PRIMARY KEY)");
    String slot = settings.slotName(DB);
    SimpleMeterRegistry metrics = new SimpleMeterRegistry();
    try (Capture capture = start(Duration.ofMillis(200), metrics, inserts("events"))) {
      assertThat(SlotState.read(DB, ds))
          .filteredOn(s -> s.slot().equals(slot))
          .singleElement()
          .satisfies(s -> assertThat(s.safeBytes()).as("no limit set").isNull())
          .satisfies(s -> assertThat(s.invalidation()).isNull());
      await()
          .atMost(TIMEOUT)
          .untilAsserted(
              () -> {
                assertThat(slotGauge(metrics, "spillway_capture_slot_wal_held_bytes"))
                    .isNotNaN()
                    .isGreaterThanOrEqualTo(0);
                assertThat(slotGauge(metrics, "spillway_capture_slot_safe_wal_bytes")).isNaN();
              });
      // A transaction left open holds the slot's restart point before it: the WAL written since
      // (about 2.5 MB) is held, and the gauge says so.
      try (Connection open = ds.getConnection()) {
        open.setAutoCommit(false);
        try (Statement st = open.createStatement()) {
          st.execute("INSERT INTO " + schema + ".events VALUES (1)");
        }
        TestSql.exec(
            ds,
            "CREATE TABLE "
                + schema
                + ".filler AS SELECT g AS id, repeat('x', 100) AS v FROM generate_series(1, 20000) g");
        await()
            .atMost(TIMEOUT)
            .untilAsserted(
                () ->
                    assertThat(slotGauge(metrics, "spillway_capture_slot_wal_held_bytes"))
                        .isGreaterThan(2_000_000));
        open.rollback();
      }
      TestSql.withSystemSetting(
          ds,
          "max_slot_wal_keep_size",
          "1GB",
          () -> {
            await()
                .atMost(TIMEOUT)
                .untilAsserted(
                    () ->
                        assertThat(SlotState.read(DB, ds))
                            .filteredOn(s -> s.slot().equals(slot))
                            .singleElement()
                            .satisfies(
                                s ->
                                    assertThat(s.safeBytes())
                                        .isNotNull()
                                        .isPositive()
                                        // counted from the end of the slot's WAL segment
                                        .isLessThanOrEqualTo((1024L + 16) * 1024 * 1024)));
            await()
                .atMost(TIMEOUT)
                .untilAsserted(
                    () ->
                        assertThat(slotGauge(metrics, "spillway_capture_slot_safe_wal_bytes"))
                            .isPositive()
                            .isLessThanOrEqualTo((1024.0 + 16) * 1024 * 1024));
          });
    }
  }

  @Test
  void should_stop_with_the_same_sentence_when_the_slot_is_invalidated_while_it_streams()
      throws Exception {
    TestSql.exec(ds, "CREATE TABLE " + schema + ".events (id bigint PRIMARY KEY, v text)");
    String slot = settings.slotName(DB);
    try (Capture capture = start(inserts("events"))) {
      insertRange(1, 1);
      TopicReader.readAtLeast(
          infra().bootstrapServers(), topics.bufferEvents("events"), 1, TIMEOUT);
      TestSql.invalidateSlot(ds, slot);
      await().atMost(TIMEOUT).alias("capture stopped").until(() -> capture.failure().isPresent());
      assertThat(capture.failure())
          .hasValue("Capture of database capture stopped: " + invalidated(slot));
    }
  }

  @Test
  void should_stream_again_after_the_server_ends_its_connection() throws Exception {
    TestSql.exec(ds, "CREATE TABLE " + schema + ".events (id bigint PRIMARY KEY, v text)");
    String topic = topics.bufferEvents("events");
    Logger root = (Logger) LoggerFactory.getLogger(Logger.ROOT_LOGGER_NAME);
    ListAppender<ILoggingEvent> logged = new ListAppender<>();
    logged.start();
    root.addAppender(logged);
    try (Capture capture = start(inserts("events"))) {
      insertRange(1, 1);
      TopicReader.readAtLeast(infra().bootstrapServers(), topic, 1, TIMEOUT);
      // What a server restart does to the stream.
      String sender = endSender(settings.slotName(DB));
      insertRange(2, 2);
      List<ConsumerRecord<byte[], byte[]>> read =
          TopicReader.readUntil(
              infra().bootstrapServers(), topic, r -> ids(r).contains(2L), TIMEOUT);
      assertThat(ids(read)).containsExactlyInAnyOrder(1L, 2L);
      assertThat(capture.failure()).isEmpty();
      assertThat(activeSender(settings.slotName(DB)))
          .as("a new WAL sender")
          .isNotNull()
          .isNotEqualTo(sender);
    } finally {
      root.detachAppender(logged);
    }
    // One warning of Spillway's, not Debezium's ERROR with its stack and two warnings.
    assertThat(logged.list)
        .filteredOn(e -> e.getLoggerName().startsWith("io.debezium"))
        .extracting(ILoggingEvent::getFormattedMessage)
        .isEmpty();
    assertThat(logged.list)
        .filteredOn(e -> e.getLoggerName().equals(Capture.class.getName()))
        .extracting(e -> e.getLevel() + " " + e.getFormattedMessage())
        .containsExactly(
            "WARN Capture of database capture lost its connection to the server (Database"
                + " connection failed when reading from copy); it reconnects, trying every 10 s, and goes on"
                + " from the last change it stored.",
            "INFO Capture of database capture reconnected.");
  }

  @Test
  void should_stop_naming_the_slot_when_it_is_gone_while_capture_runs() throws Exception {
    // Checks 200 ms apart: the check, not Debezium's reconnect 10 s on, finds it gone.
    SimpleMeterRegistry metrics = stopsNamingTheGoneSlot(Duration.ofMillis(200), TEN_S_LESS);
    assertThat(slotGauge(metrics, "spillway_capture_slot_safe_wal_bytes")).as("lost").isZero();
    assertThat(slotGauge(metrics, "spillway_capture_slot_wal_held_bytes")).isZero();
  }

  /** Less than Debezium's wait before it reconnects. */
  private static final Duration TEN_S_LESS = Duration.ofSeconds(8);

  @Test
  void should_stop_saying_so_when_a_table_it_reads_is_dropped_and_made_again() throws Exception {
    String create = "CREATE TABLE " + schema + ".events (id bigint PRIMARY KEY, v text)";
    TestSql.exec(ds, create);
    try (Capture capture =
        start(Duration.ofMillis(200), new SimpleMeterRegistry(), inserts("events"))) {
      insertRange(1, 1);
      TopicReader.readAtLeast(
          infra().bootstrapServers(), topics.bufferEvents("events"), 1, TIMEOUT);
      // A migration that makes the table anew: the new one is in no publication.
      TestSql.exec(ds, "DROP TABLE " + schema + ".events", create);
      await().atMost(TIMEOUT).alias("capture stopped").until(() -> capture.failure().isPresent());
      assertThat(capture.failure())
          .hasValue(
              "Capture of database capture stopped: Table "
                  + schema
                  + ".events left publication "
                  + settings.slotName(DB)
                  + " while capture ran (dropped, dropped and made again, or renamed), so its"
                  + " changes are no longer captured; start Spillway again to capture it (a"
                  + " buffer table's rows are then read once; a table renamed stays published"
                  + " under its new name, so once that name is configured, run `bin/spillway"
                  + " buffers reread NAME` for a buffer's rows, or `bin/spillway lfk sweep` for"
                  + " a parent's deletes, made since the rename).");
    }
    insertRange(2, 3); // while capture is stopped
    try (Capture again = start(inserts("events"))) {
      List<ConsumerRecord<byte[], byte[]>> read =
          TopicReader.readUntil(
              infra().bootstrapServers(),
              topics.bufferEvents("events"),
              r -> ids(r).containsAll(Set.of(2L, 3L)),
              TIMEOUT);
      assertThat(ids(read)).as("the new table's rows, read at the next start").contains(2L, 3L);
    }
  }

  @Test
  void should_stop_saying_what_to_do_when_a_table_it_reads_is_renamed() throws Exception {
    TestSql.exec(ds, "CREATE TABLE " + schema + ".events (id bigint PRIMARY KEY, v text)");
    try (Capture capture =
        start(Duration.ofMillis(200), new SimpleMeterRegistry(), inserts("events"))) {
      insertRange(1, 1);
      TopicReader.readAtLeast(
          infra().bootstrapServers(), topics.bufferEvents("events"), 1, TIMEOUT);
      TestSql.exec(ds, "ALTER TABLE " + schema + ".events RENAME TO activity");
      await().atMost(TIMEOUT).alias("capture stopped").until(() -> capture.failure().isPresent());
      assertThat(capture.failure().orElseThrow())
          .contains(".events left publication")
          .contains("or renamed")
          .contains("run `bin/spillway buffers reread NAME`");
    }
  }

  @Test
  void should_stop_naming_the_slot_when_debezium_finds_it_gone_before_a_check_does()
      throws Exception {
    stopsNamingTheGoneSlot(Duration.ofHours(1), TIMEOUT); // Debezium's reconnect finds it
  }

  private SimpleMeterRegistry stopsNamingTheGoneSlot(Duration slotChecks, Duration within)
      throws Exception {
    TestSql.exec(ds, "CREATE TABLE " + schema + ".events (id bigint PRIMARY KEY, v text)");
    String slot = settings.slotName(DB);
    SimpleMeterRegistry metrics = new SimpleMeterRegistry();
    try (Capture capture = start(slotChecks, metrics, inserts("events"))) {
      insertRange(1, 1);
      TopicReader.readAtLeast(
          infra().bootstrapServers(), topics.bufferEvents("events"), 1, TIMEOUT);
      // A failover to a server without the slot, or an operator dropping it between reconnects.
      endSender(slot);
      await()
          .atMost(TIMEOUT)
          .ignoreExceptions()
          .until(
              () ->
                  TestSql.text(ds, "SELECT pg_drop_replication_slot('" + slot + "')::text")
                      != null);
      await().atMost(within).alias("capture stopped").until(() -> capture.failure().isPresent());
      assertThat(capture.failure())
          .hasValue(
              "Capture of database capture stopped: Replication slot "
                  + slot
                  + " of database capture no longer exists (dropped, or not on this server after a"
                  + " failover), so changes made since it went are not captured. Start again to"
                  + " make a new one: rows then in buffer tables are read again, and 'bin/spillway"
                  + " lfk sweep' finds the children of loose-foreign-key parents deleted"
                  + " meanwhile.");
      assertThat(
              TestSql.count(
                  ds, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '" + slot + "'"))
          .as("no slot made behind the operator's back")
          .isZero();
    }
    return metrics;
  }

  private double slotGauge(SimpleMeterRegistry metrics, String name) {
    return metrics.get(name).tag("database", DB).tag("slot", settings.slotName(DB)).gauge().value();
  }

  /** What an operator reads of a slot the server invalidated for the WAL it held. */
  private static String invalidated(String slot) {
    return "Replication slot "
        + slot
        + " of database capture was invalidated by the server (wal_removed: it held more WAL than"
        + " max_slot_wal_keep_size allows), so the changes it had not streamed yet are lost;"
        + " nothing was changed. Drop it (SELECT pg_drop_replication_slot('"
        + slot
        + "')) and start again: rows then in buffer tables are read again, and 'bin/spillway lfk"
        + " sweep' finds the children of loose-foreign-key parents deleted meanwhile.";
  }

  /** Ends the WAL sender streaming from the slot; its pid. */
  private String endSender(String slot) {
    String pid = activeSender(slot);
    assertThat(pid).as("a WAL sender streams from " + slot).isNotNull();
    assertThat(TestSql.text(ds, "SELECT pg_terminate_backend(" + pid + ")::text"))
        .isEqualTo("true");
    return pid;
  }

  private String activeSender(String slot) {
    return TestSql.text(
        ds, "SELECT active_pid::text FROM pg_replication_slots WHERE slot_name = '" + slot + "'");
  }

  private String publishedActions() {
    return TestSql.text(
        ds,
        "SELECT concat_ws(', ', CASE WHEN pubinsert THEN 'insert' END,"
            + " CASE WHEN pubupdate THEN 'update' END, CASE WHEN pubdelete THEN 'delete' END,"
            + " CASE WHEN pubtruncate THEN 'truncate' END)"
            + " FROM pg_publication WHERE pubname = '"
            + settings.slotName(DB)
            + "'");
  }

  @Test
  void should_report_a_partition_delete_as_its_root_table() throws Exception {
    TestSql.exec(
        ds,
        "CREATE TABLE "
            + schema
            + ".builds (id bigint, part int, PRIMARY KEY (id, part))"
            + " PARTITION BY LIST (part)",
        "CREATE TABLE " + schema + ".builds_1 PARTITION OF " + schema + ".builds FOR VALUES IN (1)",
        "CREATE TABLE " + schema + ".builds_2 PARTITION OF " + schema + ".builds FOR VALUES IN (2)",
        "INSERT INTO " + schema + ".builds VALUES (10, 1), (20, 2)");
    CaptureRoute deletes = deletes("builds");
    try (Capture capture = start(deletes)) {
      TestSql.exec(ds, "DELETE FROM " + schema + ".builds_2 WHERE id = 20");
      List<ConsumerRecord<byte[], byte[]>> read =
          TopicReader.readAtLeast(infra().bootstrapServers(), topics.deletedRecords(), 1, TIMEOUT);
      DeletedRecord r = EventSerdes.decodeDeletedRecord(read.get(0).value());
      assertThat(r.table()).isEqualTo(table("builds"));
      assertThat(r.key()).isEqualTo(Map.of("id", 20L, "part", 2));
    }
  }

  @Test
  void should_refuse_a_slot_name_another_database_of_the_server_holds() throws Exception {
    TestSql.exec(ds, "CREATE TABLE " + schema + ".projects (id bigint PRIMARY KEY)");
    String slot = settings.slotName(DB);
    try (Databases other = infra().databases("capture_other")) {
      DataSource otherDs = other.dataSource("capture_other");
      TestSql.exec(
          otherDs, "SELECT pg_create_logical_replication_slot('" + slot + "', 'pgoutput')");
      try {
        CaptureRoute route = deletes("projects");
        assertThatThrownBy(() -> start(route))
            .isInstanceOf(CaptureSetupException.class)
            .hasMessage(
                "Replication slot "
                    + slot
                    + ", which capture of database capture would make, is taken on this server by"
                    + " database capture_other (another Spillway with the same topic prefix?);"
                    + " nothing was changed: give this one another kafka.topic-prefix.");
        assertThat(
                TestSql.count(
                    ds, "SELECT count(*) FROM pg_publication WHERE pubname = '" + slot + "'"))
            .as("nothing was changed")
            .isZero();
      } finally {
        TestSql.dropCapture(otherDs, slot);
      }
    }
  }

  @Test
  void should_refuse_a_missing_table_in_one_sentence() {
    CaptureRoute route = deletes("nope");
    assertThatThrownBy(() -> start(route))
        .isInstanceOf(CaptureSetupException.class)
        .hasMessage("Table " + schema + ".nope does not exist in database capture.");
  }

  @Test
  void should_refuse_a_partition_captured_beside_its_root() {
    TestSql.exec(
        ds,
        "CREATE TABLE " + schema + ".events (id bigint PRIMARY KEY) PARTITION BY RANGE (id)",
        "CREATE TABLE "
            + schema
            + ".events_low PARTITION OF "
            + schema
            + ".events FOR VALUES FROM (0) TO (100) PARTITION BY RANGE (id)",
        "CREATE TABLE "
            + schema
            + ".events_tiny PARTITION OF "
            + schema
            + ".events_low FOR VALUES FROM (0) TO (10)");
    CaptureRoute root = deletes("events");
    CaptureRoute partition = inserts("events_tiny");
    assertThatThrownBy(() -> start(root, partition))
        .isInstanceOf(CaptureSetupException.class)
        .hasMessage(
            "Table "
                + schema
                + ".events_tiny in database capture is a partition of "
                + schema
                + ".events, which is captured too: capture reads a partition's changes as its"
                + " captured root's, so none would reach "
                + schema
                + ".events_tiny's own definitions or buffer; nothing was changed: name only "
                + schema
                + ".events (one on the root covers its partitions), or only partitions.");
  }

  @Test
  void should_refuse_a_table_without_primary_key() {
    TestSql.exec(ds, "CREATE TABLE " + schema + ".loose (id bigint)");
    CaptureRoute route = inserts("loose");
    assertThatThrownBy(() -> start(route))
        .isInstanceOf(CaptureSetupException.class)
        .hasMessage(
            "Table "
                + schema
                + ".loose in database capture has no primary key; captured tables need one.");
  }

  @Test
  void should_refuse_a_table_without_replica_identity_in_a_database_whose_deletes_it_publishes() {
    TestSql.exec(
        ds,
        "CREATE TABLE " + schema + ".bare (id bigint PRIMARY KEY) PARTITION BY RANGE (id)",
        "CREATE TABLE "
            + schema
            + ".bare_1 PARTITION OF "
            + schema
            + ".bare FOR VALUES FROM"
            + " (0) TO (100)",
        "ALTER TABLE " + schema + ".bare_1 REPLICA IDENTITY NOTHING",
        "CREATE TABLE " + schema + ".plain (id bigint PRIMARY KEY)",
        "ALTER TABLE " + schema + ".plain REPLICA IDENTITY NOTHING",
        "CREATE TABLE " + schema + ".keyed (id bigint PRIMARY KEY, k int NOT NULL)",
        "CREATE UNIQUE INDEX keyed_k ON " + schema + ".keyed (k)",
        "ALTER TABLE " + schema + ".keyed REPLICA IDENTITY USING INDEX keyed_k",
        "DROP INDEX " + schema + ".keyed_k",
        "CREATE TABLE " + schema + ".parents (id bigint PRIMARY KEY)");
    CaptureRoute deletes = deletes("parents");

    // Its inserts alone: PostgreSQL takes its deletes, which are not published.
    assertThatCode(() -> start(inserts("bare")).close()).doesNotThrowAnyException();
    assertThatThrownBy(() -> start(inserts("bare"), deletes))
        .isInstanceOf(CaptureSetupException.class)
        .hasMessage(
            "Table "
                + schema
                + ".bare in database capture has a partition, "
                + schema
                + ".bare_1, that has no replica identity (REPLICA IDENTITY NOTHING, or its identity index dropped): once capture publishes the"
                + " database's deletes (for its loose-foreign-key parents), PostgreSQL refuses"
                + " every DELETE on it; nothing was changed: give it a replica identity (ALTER"
                + " TABLE "
                + schema
                + ".bare_1 REPLICA IDENTITY DEFAULT).");
    assertThatThrownBy(() -> start(inserts("plain"), deletes))
        .isInstanceOf(CaptureSetupException.class)
        .hasMessageStartingWith(
            "Table "
                + schema
                + ".plain in database capture has no replica identity (REPLICA IDENTITY NOTHING, or its identity index dropped): ")
        .hasMessageEndingWith(" (ALTER TABLE " + schema + ".plain REPLICA IDENTITY DEFAULT).");
    assertThatThrownBy(() -> start(inserts("keyed"), deletes))
        .as("its identity index dropped")
        .isInstanceOf(CaptureSetupException.class)
        .hasMessageStartingWith(
            "Table "
                + schema
                + ".keyed in database capture has no replica identity (REPLICA IDENTITY NOTHING, or its identity index dropped): ");
  }

  @Test
  void should_refuse_a_parent_whose_replica_identity_leaves_out_its_primary_key() throws Exception {
    TestSql.exec(
        ds,
        "CREATE TABLE " + schema + ".tenants (id bigint PRIMARY KEY, ext text NOT NULL)",
        "CREATE UNIQUE INDEX tenants_ext ON " + schema + ".tenants (ext)",
        "ALTER TABLE " + schema + ".tenants REPLICA IDENTITY USING INDEX tenants_ext",
        "CREATE TABLE " + schema + ".members (id bigint PRIMARY KEY, ext text NOT NULL)",
        "CREATE UNIQUE INDEX members_ext ON " + schema + ".members (ext) INCLUDE (id)",
        "ALTER TABLE " + schema + ".members REPLICA IDENTITY USING INDEX members_ext",
        "CREATE TABLE " + schema + ".owners (id bigint PRIMARY KEY, ext text NOT NULL)",
        "CREATE UNIQUE INDEX owners_ext_id ON " + schema + ".owners (ext, id)",
        "ALTER TABLE " + schema + ".owners REPLICA IDENTITY USING INDEX owners_ext_id");
    CaptureRoute tenantDeletes = deletes("tenants");
    CaptureRoute ownerDeletes = deletes("owners");

    assertThatThrownBy(() -> start(tenantDeletes))
        .isInstanceOf(CaptureSetupException.class)
        .hasMessage(
            "Table "
                + schema
                + ".tenants in database capture has its replica identity on index "
                + schema
                + ".tenants_ext, which leaves out its primary key: its deletes would reach capture"
                + " without the key whose children to clean up; nothing was changed: give it the"
                + " primary key's identity (ALTER TABLE "
                + schema
                + ".tenants REPLICA IDENTITY DEFAULT).");
    assertThatThrownBy(() -> start(deletes("members")))
        .as("its key only an INCLUDE column of the identity index, which the identity leaves out")
        .isInstanceOf(CaptureSetupException.class)
        .hasMessageContaining(".members in database capture has its replica identity on index");
    assertThatCode(() -> start(inserts("tenants")).close())
        .as("its inserts alone")
        .doesNotThrowAnyException();
    try (Capture capture = start(ownerDeletes)) {
      TestSql.exec(
          ds,
          "INSERT INTO " + schema + ".owners VALUES (42, 'x')",
          "DELETE FROM " + schema + ".owners WHERE id = 42");
      ConsumerRecord<byte[], byte[]> deleted =
          TopicReader.readAtLeast(infra().bootstrapServers(), topics.deletedRecords(), 1, TIMEOUT)
              .get(0);
      assertThat(EventSerdes.decodeDeletedRecord(deleted.value()).key())
          .as("an identity holding the key")
          .containsEntry("id", 42L);
    }
  }

  @Test
  void should_refuse_the_slot_of_an_installation_whose_prefix_differs_only_in_case()
      throws Exception {
    TestSql.exec(ds, "CREATE TABLE " + schema + ".events (id bigint PRIMARY KEY, v text)");
    String prefix = topics.prefix();
    CaptureSettings twin = twin();
    assertThat(twin.slotName(DB)).isEqualTo(settings.slotName(DB));
    try (Capture first = start(inserts("events"))) {
      assertThatThrownBy(
              () ->
                  Capture.start(
                      new CapturePlan(List.of(inserts("events"))),
                      databases,
                      twin,
                      new CaptureStats(null),
                      Clock.systemUTC()))
          .isInstanceOf(CaptureSetupException.class)
          .hasMessageStartingWith(
              "Replication slot and publication "
                  + settings.slotName(DB)
                  + " of database capture are another installation's (kafka.topic-prefix "
                  + prefix
                  + ", database capture), whose names differ from this one's only in case or"
                  + " punctuation; nothing was changed");

      insertRange(1, 1);
      awaitEvent(1); // the first goes on
      assertThat(first.standingBy()).isEmpty();
    }
  }

  @Test
  void should_stop_a_take_over_of_the_slot_of_an_installation_whose_prefix_differs_only_in_case()
      throws Exception {
    TestSql.exec(ds, "CREATE TABLE " + schema + ".events (id bigint PRIMARY KEY, v text)");
    String publication = settings.slotName(DB);
    Capture first = start(inserts("events"));
    Capture twin;
    try {
      // As a first installation of a version that did not mark its publication: the twin finds
      // no mark and stands by.
      TestSql.exec(ds, "COMMENT ON PUBLICATION " + publication + " IS NULL");
      twin =
          Capture.start(
              new CapturePlan(List.of(inserts("events"))),
              databases,
              twin(),
              new CaptureStats(null),
              Clock.systemUTC(),
              Duration.ofMillis(200));
      assertThat(twin.standingBy()).containsOnlyKeys(DB);
      TestSql.exec(
          ds,
          "COMMENT ON PUBLICATION "
              + publication
              + " IS '"
              + SourcePreparation.owner(topics.prefix(), DB)
              + "'");
    } finally {
      first.close(); // lets the slot go: the twin tries to take it over
    }
    try (twin) {
      await().atMost(TIMEOUT).until(() -> twin.failure().isPresent());
      assertThat(twin.failure().get()).contains(" are another installation's (kafka.topic-prefix ");
      assertThat(twin.refusal()).isPresent();
      assertThat(
              TestSql.count(
                  ds,
                  "SELECT count(*) FROM pg_replication_slots WHERE active"
                      + " AND slot_name = '"
                      + publication
                      + "'"))
          .as("not taken over")
          .isZero();
    }
  }

  /** Settings of another installation, whose prefix is this one's in upper case. */
  private CaptureSettings twin() {
    return with(
        new Topics(topics.prefix().toUpperCase(java.util.Locale.ROOT)),
        settings.heartbeatInterval());
  }

  @Test
  void should_refuse_a_role_without_replication_rights() {
    String role = "r" + schema;
    TestSql.exec(
        ds,
        "CREATE TABLE " + schema + ".projects (id bigint PRIMARY KEY)",
        "CREATE ROLE " + role + " LOGIN PASSWORD 'pw'");
    try {
      var endpoint = databases.endpoint(DB);
      try (Databases limited = TestSql.databasesAs(endpoint, DB, role, endpoint.lockTimeout())) {
        CaptureRoute route = deletes("projects");
        assertThatThrownBy(
                () ->
                    Capture.start(
                        new CapturePlan(List.of(route)),
                        limited,
                        settings,
                        new CaptureStats(null),
                        Clock.systemUTC()))
            .isInstanceOf(CaptureSetupException.class)
            .hasMessage(
                "Role "
                    + role
                    + " of database capture may not stream changes; grant it with ALTER ROLE \""
                    + role
                    + "\" REPLICATION.");
      }
    } finally {
      TestSql.exec(ds, "DROP ROLE " + role);
    }
  }

  private void insertRange(int from, int to) {
    // Small transactions, as an application would commit them.
    for (int start = from; start <= to; start += 100) {
      int end = Math.min(to, start + 99);
      TestSql.exec(
          ds,
          "INSERT INTO "
              + schema
              + ".events SELECT g, 'v' FROM generate_series("
              + start
              + ", "
              + end
              + ") g");
    }
  }

  private static Set<Long> ids(List<ConsumerRecord<byte[], byte[]>> records) {
    Set<Long> ids = new HashSet<>();
    for (ConsumerRecord<byte[], byte[]> r : records) {
      ids.add((Long) EventSerdes.decodeBufferEvent(r.value()).row().get("id"));
    }
    return ids;
  }

  /** Waits until the buffer events of table events hold row {@code id}'s insert. */
  private void awaitEvent(long id) {
    TopicReader.readUntil(
        infra().bootstrapServers(),
        topics.bufferEvents("events"),
        r -> ids(r).contains(id),
        TIMEOUT);
  }
}
