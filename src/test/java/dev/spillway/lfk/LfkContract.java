package dev.spillway.lfk;

import static dev.spillway.lfk.LfkHarness.key;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.spillway.event.DeletedRecord;
import dev.spillway.event.EventSerdes;
import dev.spillway.event.KafkaClients;
import dev.spillway.event.Pipeline;
import dev.spillway.event.TableName;
import dev.spillway.health.Health;
import dev.spillway.health.ManualIndicator;
import dev.spillway.jdbc.DatabaseEndpoint;
import dev.spillway.jdbc.Databases;
import dev.spillway.sink.Sink;
import dev.spillway.sink.SinkHeaders;
import dev.spillway.sink.SinkSettings;
import dev.spillway.testing.Infra;
import dev.spillway.testing.TestSql;
import dev.spillway.testing.TopicReader;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.Properties;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import javax.sql.DataSource;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Loose-foreign-key cleanup end to end: captured parent deletes → batches → child cleanup, on the
 * real parts {@link #infra()} gives.
 */
abstract class LfkContract {
  private static final Duration WAIT = Duration.ofSeconds(60);
  private Infra infra;

  protected abstract Infra infra();

  @org.junit.jupiter.api.BeforeEach
  void connect() {
    infra = infra();
  }

  @TempDir Path dir;

  private static LfkSettings settings(
      int deleteLimit, long maxDeletes, int maxAttempts, Duration consumeAfter, int inFlight) {
    return settings(deleteLimit, maxDeletes, maxAttempts, consumeAfter, inFlight, null);
  }

  /** With {@code pause} between a run's statements, when not null. */
  private static LfkSettings settings(
      int deleteLimit,
      long maxDeletes,
      int maxAttempts,
      Duration consumeAfter,
      int inFlight,
      Duration pause) {
    SinkSettings sink =
        SinkSettings.defaults()
            .withAttempts(maxAttempts, consumeAfter)
            .withLimits(Long.MAX_VALUE, Duration.ofSeconds(30))
            .withRetries(3, Duration.ofMillis(100));
    sink =
        new SinkSettings(
            1,
            inFlight,
            sink.maxAttempts(),
            sink.consumeAfter(),
            sink.maxRetries(),
            sink.retryBackoff(),
            sink.retryBackoffMax(),
            sink.maxRowsPerRun(),
            sink.maxRuntimePerRun(),
            pause == null ? sink.subBatchPause() : pause,
            sink.throttlePause(),
            sink.throttleFactor(),
            sink.subBatchFloor(),
            sink.pollTimeout(),
            Duration.ofSeconds(5),
            sink.stepAsideAfter());
    return new LfkSettings(
        1000, Duration.ofMillis(200), deleteLimit, 500, maxDeletes, 50_000, sink);
  }

  private static LfkSettings defaults() {
    return settings(1000, 100_000, 3, Duration.ofMinutes(10), 2);
  }

  @Test
  void should_delete_nullify_and_update_children_in_the_same_and_another_database()
      throws Exception {
    Map<String, String> dbs = Map.of("main", "lfk_main", "ci", "lfk_ci");
    seed(
        "lfk_main",
        "a",
        "CREATE TABLE a.projects (id bigint PRIMARY KEY)",
        "CREATE TABLE a.merge_requests (id bigserial PRIMARY KEY, project_id bigint)",
        "CREATE TABLE a.issues (id bigserial PRIMARY KEY, project_id bigint)",
        "CREATE TABLE a.packages (id bigserial PRIMARY KEY, project_id bigint, status int NOT NULL DEFAULT 0)",
        "INSERT INTO a.projects SELECT g FROM generate_series(1, 10) g",
        "INSERT INTO a.merge_requests (project_id) SELECT 1 + g % 10 FROM generate_series(1, 3000) g",
        "INSERT INTO a.issues (project_id) SELECT 1 + g % 10 FROM generate_series(1, 100) g",
        "INSERT INTO a.packages (project_id) SELECT 1 + g % 10 FROM generate_series(1, 100) g",
        "CREATE TABLE a.labels (id bigserial PRIMARY KEY, project_id bigint, color text DEFAULT 'red')",
        "INSERT INTO a.labels (project_id) SELECT 1 + g % 10 FROM generate_series(1, 100) g");
    seed(
        "lfk_ci",
        "a",
        "CREATE TABLE a.ci_builds (id bigserial PRIMARY KEY, project_id bigint, status text)",
        "INSERT INTO a.ci_builds (project_id, status) SELECT 1 + g % 10,"
            + " CASE WHEN g % 2 = 0 THEN 'pending' ELSE 'running' END FROM generate_series(1, 400) g");
    List<CheckedKey> keys =
        List.of(
            key(
                "a.merge_requests",
                "project_id",
                "a.projects",
                OnDelete.ASYNC_DELETE,
                "main",
                "main",
                "bigint"),
            key(
                "a.issues",
                "project_id",
                "a.projects",
                OnDelete.ASYNC_NULLIFY,
                "main",
                "main",
                "bigint"),
            key(
                "a.packages",
                "project_id",
                "a.projects",
                OnDelete.UPDATE_COLUMN_TO,
                "main",
                "main",
                "bigint",
                "status",
                4L,
                List.of()),
            key(
                "a.labels",
                "project_id",
                "a.projects",
                OnDelete.UPDATE_COLUMN_TO,
                "main",
                "main",
                "bigint",
                "color",
                null, // target_value: null
                List.of()),
            key(
                "a.ci_builds",
                "project_id",
                "a.projects",
                OnDelete.ASYNC_DELETE,
                "ci",
                "main",
                "bigint",
                null,
                null,
                List.of(new LooseForeignKey.Condition("status", "pending"))));
    try (LfkHarness h =
        new LfkHarness(infra, dir, "lfk1", dbs, Map.of("a.ci_builds", "ci"), defaults(), keys)) {
      TestSql.exec(h.db("main"), "DELETE FROM a.projects WHERE id <= 5");
      await()
          .atMost(WAIT)
          .untilAsserted(
              () -> {
                assertThat(
                        h.count(
                            "main", "SELECT count(*) FROM a.merge_requests WHERE project_id <= 5"))
                    .isZero();
                assertThat(
                        h.count("main", "SELECT count(*) FROM a.issues WHERE project_id IS NULL"))
                    .isEqualTo(50);
                assertThat(h.count("main", "SELECT count(*) FROM a.packages WHERE status = 4"))
                    .isEqualTo(50);
                assertThat(h.count("main", "SELECT count(*) FROM a.labels WHERE color IS NULL"))
                    .isEqualTo(50);
                assertThat(
                        h.count(
                            "ci",
                            "SELECT count(*) FROM a.ci_builds WHERE project_id <= 5 AND status = 'pending'"))
                    .isZero();
              });
      // Children of live parents and rows outside the conditions stay as they were.
      assertThat(h.count("main", "SELECT count(*) FROM a.merge_requests")).isEqualTo(1500);
      assertThat(
              h.count(
                  "main", "SELECT count(*) FROM a.packages WHERE project_id > 5 AND status = 0"))
          .isEqualTo(50);
      assertThat(
              h.count(
                  "main", "SELECT count(*) FROM a.labels WHERE project_id > 5 AND color = 'red'"))
          .isEqualTo(50);
      // Builds of odd projects are pending, of even ones running: 2 deleted projects × 40 stay.
      assertThat(h.count("ci", "SELECT count(*) FROM a.ci_builds WHERE project_id <= 5"))
          .isEqualTo(80);
      assertThat(h.count("ci", "SELECT count(*) FROM a.ci_builds WHERE project_id > 5"))
          .isEqualTo(200);
      await()
          .atMost(WAIT)
          .untilAsserted(
              () ->
                  assertThat(h.pipeline.metrics().snapshot().get("main/a.projects").processed())
                      .isEqualTo(5));
      String metrics = h.runtime.registry().scrape();
      assertThat(metrics)
          .contains(
              "loose_foreign_key_deletions_total{database=\"main\",table=\"a.merge_requests\"} 1500.0")
          .contains(
              "loose_foreign_key_deletions_total{database=\"ci\",table=\"a.ci_builds\"} 120.0")
          .contains("loose_foreign_key_updates_total{database=\"main\",table=\"a.issues\"} 50.0")
          .contains(
              "loose_foreign_key_processed_deleted_records_total{database=\"main\",table=\"a.projects\"} 5.0");

      // Replaying the same deleted records changes nothing.
      long before = h.count("main", "SELECT count(*) FROM a.merge_requests");
      replay(h, "lfk1", TableName.parse("a.projects"), 1, 2, 3);
      await()
          .atMost(WAIT)
          .untilAsserted(
              () ->
                  assertThat(h.pipeline.metrics().snapshot().get("main/a.projects").processed())
                      .isEqualTo(8));
      assertThat(h.count("main", "SELECT count(*) FROM a.merge_requests")).isEqualTo(before);
      assertThat(h.count("main", "SELECT count(*) FROM a.packages WHERE status = 4")).isEqualTo(50);
    } finally {
      LfkHarness.dropSlots(infra, dbs, "lfk1");
    }
  }

  @Test
  void should_leave_the_children_of_a_deleted_parent_whose_key_is_back_in_its_table()
      throws Exception {
    Map<String, String> dbs = Map.of("main", "lfk_main", "ci", "lfk_ci");
    seed(
        "lfk_main",
        "r",
        "CREATE TABLE r.projects (id bigint PRIMARY KEY)",
        "CREATE TABLE r.issues (id bigserial PRIMARY KEY, project_id bigint)",
        "INSERT INTO r.projects SELECT g FROM generate_series(1, 4) g",
        "INSERT INTO r.issues (project_id) SELECT 1 + g % 4 FROM generate_series(1, 40) g");
    seed(
        "lfk_ci",
        "r",
        "CREATE TABLE r.builds (id bigserial PRIMARY KEY, project_id bigint)",
        "INSERT INTO r.builds (project_id) SELECT 1 + g % 4 FROM generate_series(1, 40) g");
    List<CheckedKey> keys =
        List.of(
            key(
                "r.issues",
                "project_id",
                "r.projects",
                OnDelete.ASYNC_DELETE,
                "main",
                "main",
                "bigint"),
            key(
                "r.builds",
                "project_id",
                "r.projects",
                OnDelete.ASYNC_DELETE,
                "ci",
                "main",
                "bigint"));
    try (LfkHarness h =
        new LfkHarness(infra, dir, "lfk13", dbs, Map.of("r.builds", "ci"), defaults(), keys)) {
      TestSql.exec(h.db("ci"), "INSERT INTO r.builds (project_id) VALUES (1)");
      // Project 1 is replaced (deleted and inserted again, with a new issue) in one transaction:
      // capture reads its delete once the project is back.
      try (Connection c = h.db("main").getConnection()) {
        c.setAutoCommit(false);
        try (Statement st = c.createStatement()) {
          st.execute("DELETE FROM r.projects WHERE id IN (1, 2)");
          st.execute("INSERT INTO r.projects VALUES (1)");
          st.execute("INSERT INTO r.issues (project_id) VALUES (1)");
        }
        c.commit();
      }
      TestSql.exec(h.db("main"), "DELETE FROM r.projects WHERE id = 3");
      await()
          .atMost(WAIT)
          .untilAsserted(
              () -> assertThat(processed(h.pipeline.metrics(), "main/r.projects")).isEqualTo(3));
      assertThat(h.count("main", "SELECT count(*) FROM r.issues WHERE project_id IN (2, 3)"))
          .isZero();
      assertThat(h.count("ci", "SELECT count(*) FROM r.builds WHERE project_id IN (2, 3)"))
          .isZero();
      assertThat(h.count("main", "SELECT count(*) FROM r.issues WHERE project_id = 1"))
          .isEqualTo(11);
      assertThat(h.count("ci", "SELECT count(*) FROM r.builds WHERE project_id = 1")).isEqualTo(11);
      assertThat(h.count("main", "SELECT count(*) FROM r.issues WHERE project_id = 4"))
          .isEqualTo(10);
      assertThat(h.runtime.registry().scrape())
          .contains(
              "spillway_lfk_reinserted_parents_total{database=\"main\",table=\"r.projects\"} 1.0");
    } finally {
      LfkHarness.dropSlots(infra, dbs, "lfk13");
    }
  }

  @Test
  void should_dead_letter_rather_than_clean_children_of_parents_row_security_hides()
      throws Exception {
    // Project 150 is replaced (deleted and inserted again in one transaction); the policy hides it
    // from the role cleanup runs as.
    RoleCleanup run =
        cleanUpAsRole(
            "lfk15",
            "h.projects",
            "id < 100",
            "DELETE FROM h.projects WHERE id = 150",
            "INSERT INTO h.projects VALUES (150)");
    assertThat(run.reason()).contains("row-level security policy for table \"projects\"");
    assertThat(run.childrenLeft()).isEqualTo(5);
  }

  @Test
  void should_dead_letter_rather_than_leave_children_row_security_hides() throws Exception {
    // Project 150 is deleted; the policy hides three of its five children from the role.
    RoleCleanup run =
        cleanUpAsRole("lfk16", "h.issues", "id <= 2", "DELETE FROM h.projects WHERE id = 150");
    assertThat(run.reason()).contains("row-level security policy for table \"issues\"");
    assertThat(run.childrenLeft()).as("the statement failed as a whole").isEqualTo(5);
  }

  /** Why the batch was dead-lettered, and the children of project 150 then left. */
  private record RoleCleanup(String reason, long childrenLeft) {}

  /**
   * Cleans up after {@code change} (one transaction) as a role that owns nothing, with row-level
   * security on {@code table} under {@code policy}; the batch must be dead-lettered.
   */
  private RoleCleanup cleanUpAsRole(String prefix, String table, String policy, String... change)
      throws Exception {
    Map<String, String> dbs = Map.of("main", "lfk_main");
    String role = "lfk_cleaner";
    seed(
        "lfk_main",
        "h",
        "DROP ROLE IF EXISTS " + role,
        "CREATE TABLE h.projects (id bigint PRIMARY KEY)",
        "CREATE TABLE h.issues (id bigserial PRIMARY KEY, project_id bigint)",
        "INSERT INTO h.projects VALUES (150)",
        "INSERT INTO h.issues (project_id) SELECT 150 FROM generate_series(1, 5)",
        "ALTER TABLE " + table + " ENABLE ROW LEVEL SECURITY",
        "CREATE POLICY hides ON " + table + " USING (" + policy + ")",
        "CREATE ROLE " + role + " LOGIN PASSWORD 'pw'",
        "GRANT USAGE ON SCHEMA h TO " + role,
        "GRANT SELECT ON h.projects TO " + role,
        "GRANT SELECT, UPDATE, DELETE ON h.issues TO " + role);
    CheckedKey k =
        key(
            "h.issues",
            "project_id",
            "h.projects",
            OnDelete.ASYNC_DELETE,
            "main",
            "main",
            "bigint");
    LfkSettings s = defaults();
    DatabaseEndpoint e = infra.database("lfk_main");
    try (LfkHarness h = new LfkHarness(infra, dir, prefix, dbs, Map.of(), s, List.of(k));
        Databases asRole = TestSql.databasesAs(e, "main", role)) {
      h.runtime.sink(Pipeline.LFK).orElseThrow().close(Duration.ZERO);
      Sink.Wiring w = h.runtime.sinkWiring();
      try (Sink cleaner =
          Sink.start(
              Pipeline.LFK,
              h.runtime.topics().cleanupBatches(),
              new LfkCleanup(List.of(k), s, new LfkMetrics(new SimpleMeterRegistry())),
              s.sink(),
              new Sink.Wiring(
                  w.bootstrapServers(),
                  w.kafkaProperties(),
                  w.topics(),
                  w.partitions(),
                  w.replicationFactor(),
                  w.gate(),
                  asRole::dataSource,
                  w.latency(),
                  w.registry(),
                  w.clock()))) {
        try (Connection c = h.db("main").getConnection()) {
          c.setAutoCommit(false);
          try (Statement st = c.createStatement()) {
            for (String sql : change) {
              st.execute(sql);
            }
          }
          c.commit();
        }
        ConsumerRecord<byte[], byte[]> dead =
            TopicReader.readAtLeast(
                    infra.bootstrapServers(), h.runtime.topics().dlq(Pipeline.LFK), 1, WAIT)
                .get(0);
        assertThat(cleaner.metrics().deadLetteredCount()).isOne();
        return new RoleCleanup(
            SinkHeaders.text(dead.headers().lastHeader(SinkHeaders.ERROR_MESSAGE).value()),
            h.count("main", "SELECT count(*) FROM h.issues WHERE project_id = 150"));
      }
    } finally {
      LfkHarness.dropSlots(infra, dbs, prefix);
      seed("lfk_main", "h", "DROP OWNED BY " + role, "DROP ROLE " + role);
    }
  }

  @Test
  void should_stop_cleaning_the_children_of_a_parent_inserted_again_while_its_batch_runs()
      throws Exception {
    Map<String, String> dbs = Map.of("main", "lfk_main", "ci", "lfk_ci");
    seed(
        "lfk_main",
        "q",
        "CREATE TABLE q.projects (id bigint PRIMARY KEY)",
        "CREATE TABLE q.issues (id bigserial PRIMARY KEY, project_id bigint)",
        "INSERT INTO q.projects VALUES (1)",
        "INSERT INTO q.issues (project_id) SELECT 1 FROM generate_series(1, 200)");
    seed(
        "lfk_ci",
        "q",
        "CREATE TABLE q.builds (id bigserial PRIMARY KEY, project_id bigint)",
        "INSERT INTO q.builds (project_id) SELECT 1 FROM generate_series(1, 200)");
    List<CheckedKey> keys =
        List.of(
            key(
                "q.issues",
                "project_id",
                "q.projects",
                OnDelete.ASYNC_DELETE,
                "main",
                "main",
                "bigint"),
            key(
                "q.builds",
                "project_id",
                "q.projects",
                OnDelete.ASYNC_DELETE,
                "ci",
                "main",
                "bigint"));
    // Statements of 10 rows, 250 ms apart: issues are cleaned for some 5 s, then builds.
    LfkSettings s = settings(10, 100_000, 3, Duration.ofSeconds(1), 1, Duration.ofMillis(250));
    try (LfkHarness h =
        new LfkHarness(infra, dir, "lfk14", dbs, Map.of("q.builds", "ci"), s, keys)) {
      TestSql.exec(h.db("main"), "DELETE FROM q.projects");
      await()
          .atMost(WAIT)
          .pollInterval(Duration.ofMillis(20))
          .until(() -> h.count("main", "SELECT count(*) FROM q.issues") < 200);
      TestSql.exec(
          h.db("main"),
          "INSERT INTO q.projects VALUES (1)",
          "INSERT INTO q.issues (project_id) VALUES (1)");
      TestSql.exec(h.db("ci"), "INSERT INTO q.builds (project_id) VALUES (1)");
      await()
          .atMost(WAIT)
          .untilAsserted(
              () -> assertThat(processed(h.pipeline.metrics(), "main/q.projects")).isOne());
      // The batch's statements after the insert passed over project 1, in either database.
      assertThat(h.count("main", "SELECT count(*) FROM q.issues WHERE id = 201")).isOne();
      assertThat(h.count("main", "SELECT count(*) FROM q.issues")).isBetween(2L, 191L);
      assertThat(h.count("ci", "SELECT count(*) FROM q.builds")).isEqualTo(201);
    } finally {
      LfkHarness.dropSlots(infra, dbs, "lfk14");
    }
  }

  @Test
  void should_leave_a_child_whose_parent_the_transaction_it_waited_for_inserted_again()
      throws Exception {
    Map<String, String> dbs = Map.of("main", "lfk_main");
    seed(
        "lfk_main",
        "n",
        "CREATE TABLE n.projects (id bigint PRIMARY KEY)",
        "CREATE TABLE n.issues (id bigint PRIMARY KEY, project_id bigint, title text)",
        "CREATE INDEX ON n.issues (project_id)",
        "INSERT INTO n.projects VALUES (1)",
        "INSERT INTO n.issues SELECT g, 1, 'old' FROM generate_series(1, 5) g");
    List<CheckedKey> keys =
        checked(
            "lfk_main",
            key("n.issues", "project_id", "n.projects", OnDelete.ASYNC_DELETE, "main", "main", ""));
    try (LfkHarness h = new LfkHarness(infra, dir, "lfk18", dbs, Map.of(), defaults(), keys);
        Connection app = h.db("main").getConnection();
        Statement st = app.createStatement()) {
      app.setAutoCommit(false);
      st.execute("UPDATE n.issues SET title = 'kept' WHERE id = 3"); // the application holds it
      TestSql.exec(h.db("main"), "DELETE FROM n.projects WHERE id = 1");
      // Cleanup took the four others and waits for issue 3.
      TestSql.awaitBlockedBy(h.db("main"), TestSql.pid(app));
      assertThat(h.count("main", "SELECT count(*) FROM n.issues")).isOne();
      // The application puts project 1 back and commits: issue 3 is its child again.
      st.execute("INSERT INTO n.projects VALUES (1)");
      app.commit();

      await()
          .atMost(WAIT)
          .untilAsserted(
              () -> assertThat(processed(h.pipeline.metrics(), "main/n.projects")).isOne());
      assertThat(h.count("main", "SELECT count(*) FROM n.issues WHERE title = 'kept'")).isOne();
      assertThat(h.count("main", "SELECT count(*) FROM n.issues")).isOne();
    } finally {
      LfkHarness.dropSlots(infra, dbs, "lfk18");
    }
  }

  @Test
  void should_go_on_to_other_ids_when_the_rows_it_waited_for_got_their_parent_back()
      throws Exception {
    Map<String, String> dbs = Map.of("main", "lfk_main");
    seed(
        "lfk_main",
        "o",
        "CREATE TABLE o.projects (id bigint PRIMARY KEY)",
        "CREATE TABLE o.issues (id bigint PRIMARY KEY, project_id bigint, title text)",
        "CREATE INDEX ON o.issues (project_id)",
        "INSERT INTO o.projects VALUES (1), (2)",
        "INSERT INTO o.issues VALUES (1, 1, 'old'), (2, 1, 'old'), (3, 1, 'old'),"
            + " (11, 2, 'old'), (12, 2, 'old')");
    // Statements of two rows.
    LooseForeignKey k =
        new LooseForeignKey(
            TableName.parse("o.issues"),
            TableName.parse("o.projects"),
            "project_id",
            OnDelete.ASYNC_DELETE,
            Optional.empty(),
            null,
            List.of(),
            OptionalInt.of(2),
            "test");
    List<CheckedKey> keys =
        checked(
            "lfk_main",
            new CheckedKey(k, "main", "main", List.of("id"), "", "id", "", Optional.empty()));
    try (LfkHarness h = new LfkHarness(infra, dir, "lfk20", dbs, Map.of(), defaults(), keys);
        Connection restoring = h.db("main").getConnection();
        Statement s = restoring.createStatement();
        Connection editing = h.db("main").getConnection();
        Statement t = editing.createStatement()) {
      restoring.setAutoCommit(false);
      editing.setAutoCommit(false);
      // One session holds project 1's issues, another one issue of project 2.
      s.execute("UPDATE o.issues SET title = 'restored' WHERE project_id = 1");
      t.execute("UPDATE o.issues SET title = 'edited' WHERE id = 11");
      TestSql.exec(h.db("main"), "DELETE FROM o.projects WHERE id IN (1, 2)");
      // Cleanup deleted issue 12 and waits for project 1's issues, the first it asks for.
      TestSql.awaitBlockedBy(h.db("main"), TestSql.pid(restoring));
      s.execute("INSERT INTO o.projects VALUES (1)");
      restoring.commit();
      // The two it locked have their parent back and stay; it goes on to issue 11.
      TestSql.awaitBlockedBy(h.db("main"), TestSql.pid(editing));
      editing.commit();

      await()
          .atMost(WAIT)
          .untilAsserted(
              () -> assertThat(processed(h.pipeline.metrics(), "main/o.projects")).isEqualTo(2));
      assertThat(h.count("main", "SELECT count(*) FROM o.issues WHERE project_id = 2")).isZero();
      assertThat(h.count("main", "SELECT count(*) FROM o.issues WHERE title = 'restored'"))
          .isEqualTo(3);
    } finally {
      LfkHarness.dropSlots(infra, dbs, "lfk20");
    }
  }

  @Test
  void should_finish_a_batch_whose_children_a_trigger_keeps() throws Exception {
    seed(
        "lfk_main",
        "g",
        "CREATE TABLE g.projects (id bigint PRIMARY KEY)",
        "CREATE TABLE g.issues (id bigint PRIMARY KEY, project_id bigint)",
        "CREATE INDEX ON g.issues (project_id)",
        "INSERT INTO g.projects VALUES (1)",
        "INSERT INTO g.issues SELECT g, 1 FROM generate_series(1, 1500) g",
        "CREATE FUNCTION g.keep() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NULL; END$$",
        "CREATE TRIGGER keep BEFORE DELETE ON g.issues FOR EACH ROW EXECUTE FUNCTION g.keep()");
    // Each pass ends once its statement deletes none of what it takes, rather than take the
    // same rows until the run's time is up, again and again.
    afterCleanup(
        "lfk19",
        key("g.issues", "project_id", "g.projects", OnDelete.ASYNC_DELETE, "main", "main", ""),
        "DELETE FROM g.projects",
        1,
        h -> {
          assertThat(h.count("main", "SELECT count(*) FROM g.issues")).isEqualTo(1500);
          // One skip-locked statement, then two in the blocking pass, each cleaning none.
          assertThat(
                  h.runtime
                      .registry()
                      .get("spillway_sink_sub_batch")
                      .tag("pipeline", "lfk")
                      .timer()
                      .count())
              .isEqualTo(3);
        });
  }

  @Test
  void should_report_the_backlog_per_parent_while_cleanup_is_stopped() throws Exception {
    Map<String, String> dbs = Map.of("main", "lfk_main");
    seed(
        "lfk_main",
        "f",
        "CREATE TABLE f.boards (id bigint PRIMARY KEY)",
        "CREATE TABLE f.lists (id bigserial PRIMARY KEY, board_id bigint)",
        "INSERT INTO f.boards SELECT g FROM generate_series(1, 30) g",
        "INSERT INTO f.lists (board_id) SELECT 1 + g % 30 FROM generate_series(1, 300) g");
    CheckedKey k =
        key("f.lists", "board_id", "f.boards", OnDelete.ASYNC_DELETE, "main", "main", "bigint");
    try (LfkHarness h = new LfkHarness(infra, dir, "lfk6", dbs, Map.of(), defaults(), List.of(k))) {
      ManualIndicator stop = new ManualIndicator();
      stop.set(new Health.Stop("manual: held for the test"));
      h.runtime.health().addIndicators("main", List.of(stop));
      await().atMost(WAIT).until(() -> h.runtime.health().state("main", null).isStop());
      TestSql.exec(h.db("main"), "DELETE FROM f.boards WHERE id <= 12");
      long deletedAt = System.currentTimeMillis();
      await()
          .atMost(WAIT)
          .untilAsserted(
              () -> {
                List<LfkBacklog.Parent> backlog = backlog(h);
                assertThat(backlog)
                    .singleElement()
                    .satisfies(
                        p -> {
                          assertThat(p.table()).isEqualTo("f.boards");
                          assertThat(p.database()).isEqualTo("main");
                          assertThat(p.pending()).isEqualTo(12);
                          assertThat(p.rescheduled()).isZero();
                          assertThat(p.oldestCommitMicros() / 1000)
                              .isBetween(deletedAt - 10_000, deletedAt + 1_000);
                        });
              });
      await()
          .during(Duration.ofSeconds(2))
          .atMost(WAIT)
          .until(() -> h.count("main", "SELECT count(*) FROM f.lists") == 300);

      stop.set(Health.NORMAL);
      await()
          .atMost(WAIT)
          .untilAsserted(
              () -> assertThat(h.count("main", "SELECT count(*) FROM f.lists")).isEqualTo(180));
      await()
          .atMost(WAIT)
          .untilAsserted(
              () -> assertThat(backlog(h)).allSatisfy(p -> assertThat(p.pending()).isZero()));
      // Capture's own walsender streams a logical slot: it is no standby whose lag throttles.
      assertThat(h.count("main", "SELECT count(*) FROM pg_stat_replication")).isPositive();
      await().atMost(WAIT).until(() -> h.runtime.health().state("main", null) == Health.NORMAL);
    } finally {
      LfkHarness.dropSlots(infra, dbs, "lfk6");
    }
  }

  private List<LfkBacklog.Parent> backlog(LfkHarness h) throws InterruptedException {
    return LfkBacklog.read(infra.bootstrapServers(), Map.of(), h.runtime.topics(), List.of());
  }

  /**
   * The keys as {@code run} checks them against the catalog of one test database: the tables' real
   * primary keys and types.
   */
  private List<CheckedKey> checked(String database, CheckedKey... keys) throws SQLException {
    try (var dbs = infra.databases(database)) {
      return DefinitionCheck.check(
              java.util.Arrays.stream(keys).map(CheckedKey::key).toList(),
              t -> "main",
              name -> dbs.dataSource(database))
          .keys();
    }
  }

  /** What a test checks once a cleanup finished. */
  @FunctionalInterface
  private interface Cleaned {
    void check(LfkHarness h) throws Exception;
  }

  /**
   * Cleans up after {@code delete} in lfk_main with the one definition {@code key} (checked against
   * the catalog), under slots of {@code prefix}: waits until the parent's batches processed {@code
   * ids} deleted ids, then runs {@code then}.
   */
  private void afterCleanup(String prefix, CheckedKey key, String delete, long ids, Cleaned then)
      throws Exception {
    Map<String, String> dbs = Map.of("main", "lfk_main");
    List<CheckedKey> keys = checked("lfk_main", key);
    String parent = "main/" + key.key().parent();
    try (LfkHarness h = new LfkHarness(infra, dir, prefix, dbs, Map.of(), defaults(), keys)) {
      TestSql.exec(h.db("main"), delete);
      await()
          .atMost(WAIT)
          .untilAsserted(() -> assertThat(processed(h.pipeline.metrics(), parent)).isEqualTo(ids));
      then.check(h);
    } finally {
      LfkHarness.dropSlots(infra, dbs, prefix);
    }
  }

  /** A fresh schema in a test database, filled by the statements. */
  private void seed(String database, String schema, String... statements) {
    try (var dbs = infra.databases(database)) {
      TestSql.exec(
          dbs.dataSource(database),
          "DROP SCHEMA IF EXISTS " + schema + " CASCADE",
          "CREATE SCHEMA " + schema);
      TestSql.exec(dbs.dataSource(database), statements);
    }
  }

  private static long processed(LfkMetrics metrics, String parent) {
    return counts(metrics, parent).processed();
  }

  private static LfkMetrics.ParentCounts counts(LfkMetrics metrics, String parent) {
    return metrics.snapshot().getOrDefault(parent, new LfkMetrics.ParentCounts(0, 0, 0));
  }

  /** Hands what a sweep found to the harness's cleanup, as {@code lfk sweep} does. */
  private OrphanSweep.HandOver handOver(LfkHarness h, OrphanSweep.Result found)
      throws InterruptedException {
    try (var producer =
        KafkaClients.producer(Map.of(), Map.of(), infra.bootstrapServers(), "sweep-test")) {
      return OrphanSweep.handOver(
          found, producer, h.runtime.topics().deletedRecords(), Clock.systemUTC());
    }
  }

  private void replay(LfkHarness h, String prefix, TableName parent, long... ids) {
    Properties p = new Properties();
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, infra.bootstrapServers());
    try (var producer = new KafkaProducer<>(p, new StringSerializer(), new ByteArraySerializer())) {
      for (long id : ids) {
        DeletedRecord r = new DeletedRecord("main", parent, Map.of("id", id), 1, 1, 1);
        producer.send(
            new ProducerRecord<>(
                h.runtime.topics().deletedRecords(), parent.toString(), EventSerdes.encode(r)));
      }
      producer.flush();
    }
  }

  @Test
  void should_sweep_up_parents_deleted_while_capture_did_not_run_and_clean_their_children()
      throws Exception {
    Map<String, String> dbs = Map.of("main", "lfk_main", "ci", "lfk_ci");
    seed(
        "lfk_main",
        "w",
        "CREATE TABLE w.projects (id bigint PRIMARY KEY)",
        "CREATE TABLE w.merge_requests (id bigserial PRIMARY KEY, project_id bigint)",
        "CREATE INDEX ON w.merge_requests (project_id)",
        "CREATE TABLE w.packages (id bigserial PRIMARY KEY, project_id bigint,"
            + " status int NOT NULL DEFAULT 0)",
        "INSERT INTO w.projects SELECT g FROM generate_series(1, 20) g",
        "INSERT INTO w.merge_requests (project_id) SELECT 1 + g % 20 FROM generate_series(0, 59) g",
        "INSERT INTO w.packages (project_id) SELECT 1 + g % 20 FROM generate_series(0, 39) g",
        // Deleted before capture ran, so no delete of them is ever captured.
        "DELETE FROM w.projects WHERE id <= 6",
        // Project 1's packages were already updated: nothing left to do for them.
        "UPDATE w.packages SET status = 4 WHERE project_id = 1");
    seed(
        "lfk_ci",
        "w",
        "CREATE TABLE w.ci_builds (id bigserial PRIMARY KEY, project_id bigint, status text)",
        "INSERT INTO w.ci_builds (project_id, status) SELECT 1 + g % 20,"
            + " CASE WHEN g < 20 THEN 'pending' ELSE 'running' END FROM generate_series(0, 39) g");
    List<CheckedKey> keys =
        List.of(
            key(
                "w.merge_requests",
                "project_id",
                "w.projects",
                OnDelete.ASYNC_DELETE,
                "main",
                "main",
                "bigint"),
            key(
                "w.packages",
                "project_id",
                "w.projects",
                OnDelete.UPDATE_COLUMN_TO,
                "main",
                "main",
                "bigint",
                "status",
                4L,
                List.of()),
            key(
                "w.ci_builds",
                "project_id",
                "w.projects",
                OnDelete.ASYNC_DELETE,
                "ci",
                "main",
                "bigint",
                null,
                null,
                List.of(new LooseForeignKey.Condition("status", "pending"))));
    try (LfkHarness h =
        new LfkHarness(infra, dir, "lfk9", dbs, Map.of("w.ci_builds", "ci"), defaults(), keys)) {
      // Project 6 comes back between the two looks, as a parent whose transaction had not
      // committed at the first one would: it is not taken for deleted.
      OrphanSweep.Result found =
          OrphanSweep.find(
              keys,
              h.runtime.databases()::dataSource,
              4,
              Duration.ofMillis(1),
              d -> TestSql.exec(h.db("main"), "INSERT INTO w.projects VALUES (6)"));
      assertThat(found.deleted())
          .containsExactly(
              Map.entry(
                  new OrphanSweep.Parent("main", TableName.parse("w.projects"), "id"),
                  List.of("1", "2", "3", "4", "5")));
      assertThat(found.findings())
          .extracting(f -> f.referred() + "/" + f.deleted())
          .containsExactly("20/5", "19/4", "20/5");

      assertThat(handOver(h, found)).isEqualTo(new OrphanSweep.HandOver(5, 0, null));
      await()
          .atMost(WAIT)
          .untilAsserted(
              () -> {
                assertThat(
                        h.count(
                            "main", "SELECT count(*) FROM w.merge_requests WHERE project_id <= 5"))
                    .isZero();
                assertThat(
                        h.count(
                            "main",
                            "SELECT count(*) FROM w.packages WHERE project_id <= 5 AND status = 4"))
                    .isEqualTo(10);
                assertThat(
                        h.count(
                            "ci",
                            "SELECT count(*) FROM w.ci_builds WHERE project_id <= 5"
                                + " AND status = 'pending'"))
                    .isZero();
              });
      assertThat(h.count("main", "SELECT count(*) FROM w.merge_requests")).isEqualTo(45);
      assertThat(h.count("main", "SELECT count(*) FROM w.packages WHERE status = 4")).isEqualTo(10);
      assertThat(h.count("ci", "SELECT count(*) FROM w.ci_builds")).isEqualTo(35);

      // Cleaned, nothing is left to find: updated packages and running builds are not cleanup's.
      OrphanSweep.Result again =
          OrphanSweep.find(keys, h.runtime.databases()::dataSource, 1000, Duration.ZERO, d -> {});
      assertThat(again.deleted()).isEmpty();
      assertThat(again.findings())
          .extracting(f -> f.referred() + "/" + f.deleted())
          .containsExactly("15/0", "15/0", "15/0");
    } finally {
      LfkHarness.dropSlots(infra, dbs, "lfk9");
    }
  }

  @Test
  void should_not_take_a_parent_a_transaction_still_writes_for_a_deleted_one() throws Exception {
    Map<String, String> dbs = Map.of("main", "lfk_main");
    seed(
        "lfk_main",
        "x",
        "CREATE TABLE x.projects (id bigint PRIMARY KEY)",
        "CREATE TABLE x.issues (id bigserial PRIMARY KEY, project_id bigint)",
        "CREATE INDEX ON x.issues (project_id)",
        "INSERT INTO x.projects VALUES (1)",
        "INSERT INTO x.issues (project_id) VALUES (1), (2), (3)");
    List<CheckedKey> keys =
        List.of(
            key(
                "x.issues",
                "project_id",
                "x.projects",
                OnDelete.ASYNC_DELETE,
                "main",
                "main",
                "bigint"));
    try (LfkHarness h = new LfkHarness(infra, dir, "lfk10", dbs, Map.of(), defaults(), keys);
        Connection writer = h.db("main").getConnection()) {
      // Project 2 is being written: its issue was committed first; the transaction writing the
      // project has begun (it has read, not written yet) and writes it while the sweep runs.
      writer.setAutoCommit(false);
      try (Statement s = writer.createStatement()) {
        s.execute("SELECT count(*) FROM x.projects");
      }
      CompletableFuture<OrphanSweep.Result> sweep =
          CompletableFuture.supplyAsync(
              () -> {
                try {
                  return OrphanSweep.find(
                      keys, h.runtime.databases()::dataSource, 1000, Duration.ZERO, d -> {});
                } catch (Exception e) {
                  throw new CompletionException(e);
                }
              });
      // The sweep reaches its wait once it asks the server which transactions are open.
      await()
          .atMost(WAIT)
          .until(
              () ->
                  h.count(
                          "main",
                          "SELECT count(*) FROM pg_stat_activity WHERE query LIKE"
                              + " '%FROM pg_prepared_xacts%' AND pid <> pg_backend_pid()")
                      > 0);
      assertThat(sweep).as("waits for the transaction begun before its first look").isNotDone();
      try (Statement s = writer.createStatement()) {
        s.execute("INSERT INTO x.projects VALUES (2)");
      }
      writer.commit();
      OrphanSweep.Result found = sweep.get(30, TimeUnit.SECONDS);
      assertThat(found.deleted())
          .containsExactly(
              Map.entry(
                  new OrphanSweep.Parent("main", TableName.parse("x.projects"), "id"),
                  List.of("3")));
    } finally {
      LfkHarness.dropSlots(infra, dbs, "lfk10");
    }
  }

  @Test
  void should_sweep_keys_of_other_types_under_quoted_names_and_skip_what_it_cannot_read()
      throws Exception {
    Map<String, String> dbs = Map.of("main", "lfk_main");
    seed(
        "lfk_main",
        "\"Y\"",
        "CREATE TABLE \"Y\".\"Accounts\" (\"Id\" uuid PRIMARY KEY)",
        "CREATE TABLE \"Y\".\"Notes\" (id bigserial PRIMARY KEY, \"AccountId\" uuid)",
        "CREATE INDEX ON \"Y\".\"Notes\" (\"AccountId\")",
        "INSERT INTO \"Y\".\"Accounts\" VALUES ('00000000-0000-0000-0000-000000000001')",
        "INSERT INTO \"Y\".\"Notes\" (\"AccountId\") VALUES"
            + " ('00000000-0000-0000-0000-000000000001'), ('00000000-0000-0000-0000-000000000002'),"
            + " ('00000000-0000-0000-0000-000000000002')",
        "CREATE TABLE \"Y\".projects (id bigint PRIMARY KEY)",
        "CREATE TABLE \"Y\".refs (id bigserial PRIMARY KEY, project_ref varchar(64))",
        "CREATE INDEX ON \"Y\".refs (project_ref)",
        "CREATE TABLE \"Y\".logs (id bigserial PRIMARY KEY, project_id bigint)",
        "INSERT INTO \"Y\".projects VALUES (1), (7)",
        "INSERT INTO \"Y\".refs (project_ref) VALUES ('1'), ('2'), ('abc'), ('008'), ('007')",
        "INSERT INTO \"Y\".logs (project_id) VALUES (2)");
    List<CheckedKey> keys =
        List.of(
            new CheckedKey(
                key(
                        "Y.Notes",
                        "AccountId",
                        "Y.Accounts",
                        OnDelete.ASYNC_DELETE,
                        "main",
                        "main",
                        "uuid")
                    .key(),
                "main",
                "main",
                List.of("id"),
                "uuid",
                "Id",
                "uuid",
                Optional.empty()),
            new CheckedKey(
                key(
                        "Y.refs",
                        "project_ref",
                        "Y.projects",
                        OnDelete.ASYNC_DELETE,
                        "main",
                        "main",
                        "character varying(64)")
                    .key(),
                "main",
                "main",
                List.of("id"),
                "character varying(64)",
                "id",
                "bigint",
                Optional.empty()),
            new CheckedKey(
                key(
                        "Y.logs",
                        "project_id",
                        "Y.projects",
                        OnDelete.ASYNC_DELETE,
                        "main",
                        "main",
                        "bigint")
                    .key(),
                "main",
                "main",
                List.of("id"),
                "bigint",
                "id",
                "bigint",
                Optional.of("no index starts with project_id (add one, as the warning says)")));
    try (LfkHarness h = new LfkHarness(infra, dir, "lfk11", dbs, Map.of(), defaults(), keys)) {
      OrphanSweep.Result found =
          OrphanSweep.find(keys, h.runtime.databases()::dataSource, 2, Duration.ZERO, d -> {});
      assertThat(found.findings())
          .extracting(
              f -> f.swept() + " " + f.referred() + "/" + f.unreadable() + "/" + f.deleted())
          .containsExactly("true 2/0/1", "true 5/1/2", "false 0/0/0");
      assertThat(found.deleted().values())
          .containsExactly(
              List.of("00000000-0000-0000-0000-000000000002"),
              // As the child holds them: '007' is project 7, which exists; '008' is not.
              List.of("2", "008"));

      assertThat(handOver(h, found).failed()).isZero();
      await()
          .atMost(WAIT)
          .untilAsserted(
              () -> {
                assertThat(h.count("main", "SELECT count(*) FROM \"Y\".\"Notes\"")).isEqualTo(1);
                assertThat(h.count("main", "SELECT count(*) FROM \"Y\".refs")).isEqualTo(3);
              });
      assertThat(
              h.count(
                  "main",
                  "SELECT count(*) FROM \"Y\".refs WHERE project_ref IN ('1', 'abc', '007')"))
          .isEqualTo(3);
    } finally {
      LfkHarness.dropSlots(infra, dbs, "lfk11");
    }
  }

  @Test
  void should_not_clean_children_of_a_live_parent_whose_key_a_deleted_ones_begins_with()
      throws Exception {
    seed(
        "lfk_main",
        "v",
        "CREATE TABLE v.tags (name text PRIMARY KEY)",
        "CREATE TABLE v.labels (id bigserial PRIMARY KEY, tag varchar(3))",
        "CREATE INDEX ON v.labels (tag)",
        "INSERT INTO v.tags VALUES ('abc'), ('abcdef')",
        "INSERT INTO v.labels (tag) VALUES ('abc'), ('abc')");
    afterCleanup(
        "lfk12",
        key("v.labels", "tag", "v.tags", OnDelete.ASYNC_DELETE, "main", "main", ""),
        "DELETE FROM v.tags WHERE name = 'abcdef'",
        1,
        // Cast to varchar(3), the deleted abcdef would have been abc, the live parent's key.
        h -> assertThat(h.count("main", "SELECT count(*) FROM v.labels")).isEqualTo(2));
  }

  @Test
  void should_clean_a_text_column_referring_to_a_character_key_without_its_padding()
      throws Exception {
    seed(
        "lfk_main",
        "q",
        "CREATE TABLE q.codes (code char(8) PRIMARY KEY)",
        "CREATE TABLE q.items (id bigserial PRIMARY KEY, code varchar)",
        "CREATE INDEX ON q.items (code)",
        "INSERT INTO q.codes VALUES ('AB'), ('CD')",
        "INSERT INTO q.items (code) VALUES ('AB'), ('AB'), ('CD')");
    // The deleted key comes as char(8) writes it, 'AB      '; the items say 'AB'.
    afterCleanup(
        "lfk21",
        key("q.items", "code", "q.codes", OnDelete.ASYNC_DELETE, "main", "main", ""),
        "DELETE FROM q.codes WHERE code = 'AB'",
        1,
        h -> {
          assertThat(h.count("main", "SELECT count(*) FROM q.items WHERE code = 'AB'")).isZero();
          assertThat(h.count("main", "SELECT count(*) FROM q.items")).isOne();
        });
  }

  @Test
  void should_sweep_apart_a_text_child_that_a_character_key_matches_only_without_its_spaces()
      throws Exception {
    Map<String, String> dbs = Map.of("main", "lfk_main");
    seed(
        "lfk_main",
        "q2",
        "CREATE TABLE q2.codes (code char(8) PRIMARY KEY)",
        "CREATE TABLE q2.items (id bigserial PRIMARY KEY, code varchar)",
        "CREATE INDEX ON q2.items (code)",
        "INSERT INTO q2.codes VALUES ('CD')",
        "INSERT INTO q2.items (code) VALUES ('AB'), ('AB '), ('CD'), ('CD ')");
    List<CheckedKey> keys =
        List.of(
            new CheckedKey(
                key("q2.items", "code", "q2.codes", OnDelete.ASYNC_DELETE, "main", "main", "")
                    .key(),
                "main",
                "main",
                List.of("id"),
                "character varying",
                "code",
                "bpchar",
                Optional.empty()));
    try (LfkHarness h = new LfkHarness(infra, dir, "lfk23", dbs, Map.of(), defaults(), keys)) {
      OrphanSweep.Result found =
          OrphanSweep.find(keys, h.runtime.databases()::dataSource, 2, Duration.ZERO, d -> {});

      // 'CD ' is live CD's child; 'AB ' is deleted AB's, but cleanup, asking for 'AB', leaves it:
      // handed over, it would be found again at every sweep.
      assertThat(found.findings())
          .extracting(f -> f.referred() + "/" + f.unreadable() + "/" + f.deleted() + "/" + f.left())
          .containsExactly("4/0/1/1");
      assertThat(found.deleted().values()).containsExactly(List.of("AB"));
    } finally {
      LfkHarness.dropSlots(infra, dbs, "lfk23");
    }
  }

  @Test
  void should_clean_an_integer_column_referring_to_a_bigint_key_past_its_range() throws Exception {
    seed(
        "lfk_main",
        "k",
        "CREATE TABLE k.accounts (id bigint PRIMARY KEY)",
        "CREATE TABLE k.logins (id bigserial PRIMARY KEY, account_id integer)",
        "CREATE INDEX ON k.logins (account_id)",
        "INSERT INTO k.accounts VALUES (5), (6), (3000000000)",
        "INSERT INTO k.logins (account_id) VALUES (5), (5), (6)");
    // One statement: the two ids are one batch, and no login can refer to the larger one.
    afterCleanup(
        "lfk17",
        key("k.logins", "account_id", "k.accounts", OnDelete.ASYNC_DELETE, "main", "main", ""),
        "DELETE FROM k.accounts WHERE id IN (5, 3000000000)",
        2,
        h -> {
          assertThat(h.count("main", "SELECT count(*) FROM k.logins WHERE account_id = 5"))
              .isZero();
          assertThat(h.count("main", "SELECT count(*) FROM k.logins")).isOne();
        });
  }

  @Test
  void should_clean_children_of_a_partitioned_parent_deleted_through_its_partition()
      throws Exception {
    Map<String, String> dbs = Map.of("main", "lfk_main");
    seed(
        "lfk_main",
        "b",
        "CREATE TABLE b.events (id bigint PRIMARY KEY) PARTITION BY RANGE (id)",
        "CREATE TABLE b.events_1 PARTITION OF b.events FOR VALUES FROM (0) TO (100)",
        "CREATE TABLE b.events_2 PARTITION OF b.events FOR VALUES FROM (100) TO (200)",
        "CREATE TABLE b.notes (id bigserial PRIMARY KEY, event_id bigint)",
        "INSERT INTO b.events SELECT g FROM generate_series(1, 150) g",
        "INSERT INTO b.notes (event_id) SELECT g FROM generate_series(1, 150) g");
    List<CheckedKey> keys =
        List.of(
            key(
                "b.notes",
                "event_id",
                "b.events",
                OnDelete.ASYNC_DELETE,
                "main",
                "main",
                "bigint"));
    try (LfkHarness h = new LfkHarness(infra, dir, "lfk2", dbs, Map.of(), defaults(), keys)) {
      TestSql.exec(h.db("main"), "DELETE FROM b.events_2 WHERE id < 120");
      await()
          .atMost(WAIT)
          .untilAsserted(
              () -> assertThat(h.count("main", "SELECT count(*) FROM b.notes")).isEqualTo(130));
      assertThat(h.count("main", "SELECT count(*) FROM b.notes WHERE event_id BETWEEN 100 AND 119"))
          .isZero();
    } finally {
      LfkHarness.dropSlots(infra, dbs, "lfk2");
    }
  }

  @Test
  void should_clean_children_of_a_parent_keyed_by_id_and_partition_by_its_id() throws Exception {
    seed(
        "lfk_main",
        "pb",
        "CREATE TABLE pb.builds (partition_id int, id bigint, PRIMARY KEY (partition_id, id))"
            + " PARTITION BY LIST (partition_id)",
        "CREATE TABLE pb.builds_100 PARTITION OF pb.builds FOR VALUES IN (100)",
        "CREATE TABLE pb.builds_101 PARTITION OF pb.builds FOR VALUES IN (101)",
        "CREATE TABLE pb.artifacts (id bigserial PRIMARY KEY, build_id bigint)",
        "CREATE INDEX ON pb.artifacts (build_id)",
        "INSERT INTO pb.builds VALUES (100, 1), (100, 2), (101, 2), (101, 3)",
        "INSERT INTO pb.artifacts (build_id) VALUES (1), (1), (2), (3)");
    // Deletes carry both key columns; children refer to the id alone, as GitLab's do.
    afterCleanup(
        "lfk24",
        key("pb.artifacts", "build_id", "pb.builds", OnDelete.ASYNC_DELETE, "main", "main", ""),
        "DELETE FROM pb.builds WHERE partition_id = 100",
        2,
        h -> {
          assertThat(h.count("main", "SELECT count(*) FROM pb.artifacts WHERE build_id = 1"))
              .isZero();
          assertThat(h.count("main", "SELECT count(*) FROM pb.artifacts WHERE build_id IN (2, 3)"))
              .as("id 2 is still a build's, in the other partition: its artifact is left")
              .isEqualTo(2);
        });
  }

  @Test
  void should_leave_the_row_of_a_table_inheriting_from_the_child_that_shares_a_cleaned_rows_key()
      throws Exception {
    seed(
        "lfk_main",
        "h",
        "CREATE TABLE h.events (id bigint PRIMARY KEY)",
        "CREATE TABLE h.notes (id bigint PRIMARY KEY, event_id bigint)",
        // Its primary key is its own: a row here may share an id with one of h.notes.
        "CREATE TABLE h.old_notes (PRIMARY KEY (id)) INHERITS (h.notes)",
        "INSERT INTO h.events VALUES (5), (6)",
        "INSERT INTO h.notes VALUES (1, 5), (2, 6)",
        "INSERT INTO h.old_notes VALUES (1, 6), (3, 5)");
    afterCleanup(
        "lfk22",
        key("h.notes", "event_id", "h.events", OnDelete.ASYNC_DELETE, "main", "main", ""),
        "DELETE FROM h.events WHERE id = 5",
        1,
        h -> {
          // The deleted parent's children are gone from both tables; the live one's are left.
          assertThat(h.count("main", "SELECT count(*) FROM h.notes WHERE event_id = 5")).isZero();
          assertThat(h.count("main", "SELECT count(*) FROM ONLY h.notes")).isOne();
          assertThat(h.count("main", "SELECT count(*) FROM h.old_notes WHERE event_id = 6"))
              .isOne();
        });
  }

  @Test
  void should_clean_children_of_parents_keyed_by_a_date_and_by_a_timestamp() throws Exception {
    Map<String, String> dbs = Map.of("main", "lfk_main");
    seed(
        "lfk_main",
        "d",
        "CREATE TABLE d.days (day date PRIMARY KEY)",
        "CREATE TABLE d.shifts (starts_at timestamp PRIMARY KEY)",
        "CREATE TABLE d.day_notes (id bigserial PRIMARY KEY, day date)",
        "CREATE TABLE d.shift_notes (id bigserial PRIMARY KEY, starts_at timestamp)",
        "INSERT INTO d.days SELECT DATE '1969-12-30' + g FROM generate_series(0, 4) g",
        "INSERT INTO d.shifts SELECT TIMESTAMP '2026-01-02 03:04:05.25' + g * interval '1 hour'"
            + " FROM generate_series(0, 4) g",
        "INSERT INTO d.day_notes (day) SELECT day FROM d.days, generate_series(1, 3)",
        "INSERT INTO d.shift_notes (starts_at) SELECT starts_at FROM d.shifts, generate_series(1, 3)");
    List<CheckedKey> keys =
        checked(
            "lfk_main",
            key("d.day_notes", "day", "d.days", OnDelete.ASYNC_DELETE, "main", "main", ""),
            key(
                "d.shift_notes",
                "starts_at",
                "d.shifts",
                OnDelete.ASYNC_DELETE,
                "main",
                "main",
                ""));
    try (LfkHarness h = new LfkHarness(infra, dir, "lfk7", dbs, Map.of(), defaults(), keys)) {
      TestSql.exec(
          h.db("main"),
          "DELETE FROM d.days WHERE day IN ('1969-12-31', '2026-01-01', '1970-01-01')",
          "DELETE FROM d.shifts WHERE starts_at < '2026-01-02 05:00'");
      await()
          .atMost(WAIT)
          .untilAsserted(
              () -> {
                assertThat(h.count("main", "SELECT count(*) FROM d.day_notes")).isEqualTo(9);
                assertThat(h.count("main", "SELECT count(*) FROM d.shift_notes")).isEqualTo(9);
              });
      assertThat(
              h.count(
                  "main",
                  "SELECT count(*) FROM d.day_notes WHERE day NOT IN (SELECT day FROM d.days)"))
          .isZero();
      assertThat(
              h.count(
                  "main",
                  "SELECT count(*) FROM d.shift_notes"
                      + " WHERE starts_at NOT IN (SELECT starts_at FROM d.shifts)"))
          .isZero();
    } finally {
      LfkHarness.dropSlots(infra, dbs, "lfk7");
    }
  }

  @Test
  void should_count_attempts_delay_and_still_finish_when_runs_hit_their_limit() throws Exception {
    Map<String, String> dbs = Map.of("main", "lfk_main");
    seed(
        "lfk_main",
        "c",
        "CREATE TABLE c.users (id bigint PRIMARY KEY)",
        "CREATE TABLE c.todos (id bigserial PRIMARY KEY, user_id bigint)",
        "INSERT INTO c.users VALUES (1)",
        "INSERT INTO c.todos (user_id) SELECT 1 FROM generate_series(1, 100) g");
    List<CheckedKey> keys =
        List.of(
            key("c.todos", "user_id", "c.users", OnDelete.ASYNC_DELETE, "main", "main", "bigint"));
    // 10 rows a statement, 20 a run, delayed 1 s after every second unfinished run.
    LfkSettings s = settings(10, 20, 2, Duration.ofSeconds(1), 2);
    try (LfkHarness h = new LfkHarness(infra, dir, "lfk3", dbs, Map.of(), s, keys)) {
      TestSql.exec(h.db("main"), "DELETE FROM c.users");
      await()
          .atMost(WAIT)
          .untilAsserted(
              () -> assertThat(h.count("main", "SELECT count(*) FROM c.todos")).isZero());
      await()
          .atMost(WAIT)
          .untilAsserted(
              () -> {
                LfkMetrics.ParentCounts c = h.pipeline.metrics().snapshot().get("main/c.users");
                assertThat(c.processed()).isEqualTo(1);
                // 100 rows at 20 a run: five runs end at the limit (the fifth before it sees that
                // nothing is left). With two attempts, every second one delays the batch, whose
                // attempts then start again: runs 1, 3 and 5 count an attempt, 2 and 4 a delay.
                assertThat(c.incremented()).isEqualTo(3);
                assertThat(c.rescheduled()).isEqualTo(2);
              });
    } finally {
      LfkHarness.dropSlots(infra, dbs, "lfk3");
    }
  }

  @Test
  void should_clean_the_children_of_a_delete_captured_before_it_was_visible_once_it_is()
      throws Exception {
    Map<String, String> dbs = Map.of("main", "lfk_main");
    seed(
        "lfk_main",
        "sv",
        "CREATE TABLE sv.projects (id bigint PRIMARY KEY)",
        "CREATE TABLE sv.issues (id bigint PRIMARY KEY, project_id bigint)",
        "INSERT INTO sv.projects VALUES (1), (2), (3)",
        "INSERT INTO sv.issues SELECT g, 1 FROM generate_series(1, 10) g",
        "INSERT INTO sv.issues SELECT g, 2 FROM generate_series(11, 15) g",
        "INSERT INTO sv.issues SELECT g, 3 FROM generate_series(16, 20) g",
        // Every session of the database commits locally, whatever the server's command line
        // says; the delete under test asks for the standby itself.
        "ALTER DATABASE lfk_main SET synchronous_commit = local");
    List<CheckedKey> keys =
        List.of(
            key(
                "sv.issues",
                "project_id",
                "sv.projects",
                OnDelete.ASYNC_DELETE,
                "main",
                "main",
                "bigint"));
    LfkSettings s = settings(1000, 100_000, 3, Duration.ofSeconds(1), 2);
    try (LfkHarness h = new LfkHarness(infra, dir, "lfk25", dbs, Map.of(), s, keys);
        Connection deleter = h.db("main").getConnection()) {
      DataSource admin = h.db("main");
      CompletableFuture<Void> delete;
      // A synchronous standby that never answers: the delete's commit is in the WAL, so capture
      // reads it, while its session waits and other sessions still see the project.
      AtomicReference<CompletableFuture<Void>> started = new AtomicReference<>();
      TestSql.withSystemSetting(
          admin,
          "synchronous_standby_names",
          "nobody",
          () -> {
            // Project 2's delete commits locally, visible at once.
            TestSql.exec(admin, "DELETE FROM sv.projects WHERE id = 2");
            started.set(
                CompletableFuture.runAsync(
                    () -> {
                      try {
                        deleter.setAutoCommit(false);
                        try (Statement st = deleter.createStatement()) {
                          st.execute("SET LOCAL synchronous_commit = on");
                          st.execute("DELETE FROM sv.projects WHERE id = 1");
                          // Locked, then deleted in a savepoint: the row's xmax is a multixact
                          // of the two, naming neither transaction.
                          st.execute("SELECT 1 FROM sv.projects WHERE id = 3 FOR UPDATE");
                          st.execute("SAVEPOINT s");
                          st.execute("DELETE FROM sv.projects WHERE id = 3");
                          st.execute("RELEASE SAVEPOINT s");
                        }
                        deleter.commit();
                      } catch (java.sql.SQLException e) {
                        throw new IllegalStateException(e);
                      }
                    }));
            await()
                .atMost(WAIT)
                .until(
                    () ->
                        counts(h.pipeline.metrics(), "main/sv.projects").incremented()
                                + processed(h.pipeline.metrics(), "main/sv.projects")
                            > 1);
            assertThat(processed(h.pipeline.metrics(), "main/sv.projects"))
                .as("projects 1 and 3 not taken for keys that are back")
                .isLessThanOrEqualTo(1);
            assertThat(started.get()).as("the delete still waits").isNotDone();
            assertThat(h.count("main", "SELECT count(*) FROM sv.issues WHERE project_id = 2"))
                .as("the other deleted project's children, not held back")
                .isZero();
            assertThat(h.count("main", "SELECT count(*) FROM sv.issues WHERE project_id IN (1, 3)"))
                .isEqualTo(15);
            assertThat(h.runtime.registry().scrape())
                .as("no key taken for one that is back")
                .doesNotContain(
                    "spillway_lfk_reinserted_parents_total{database=\"main\",table=\"sv.projects\"}");
          });
      delete = started.get();
      delete.get(30, TimeUnit.SECONDS); // released once no standby is asked for

      await()
          .atMost(WAIT)
          .untilAsserted(
              () -> {
                assertThat(h.count("main", "SELECT count(*) FROM sv.issues")).isZero();
                assertThat(processed(h.pipeline.metrics(), "main/sv.projects")).isEqualTo(3);
              });
      assertThat(h.runtime.registry().scrape())
          .doesNotContain(
              "spillway_lfk_reinserted_parents_total{database=\"main\",table=\"sv.projects\"}");
    } finally {
      LfkHarness.dropSlots(infra, dbs, "lfk25");
      try (var admin = infra.databases("lfk_main")) {
        TestSql.exec(
            admin.dataSource("lfk_main"), "ALTER DATABASE lfk_main RESET synchronous_commit");
      }
    }
  }

  @Test
  void should_take_a_key_that_is_back_at_once_while_another_session_locks_its_row()
      throws Exception {
    Map<String, String> dbs = Map.of("main", "lfk_main");
    seed(
        "lfk_main",
        "kb",
        "CREATE TABLE kb.projects (id bigint PRIMARY KEY)",
        "CREATE TABLE kb.issues (id bigint PRIMARY KEY, project_id bigint)",
        "INSERT INTO kb.projects VALUES (1)",
        "INSERT INTO kb.issues SELECT g, 1 FROM generate_series(1, 10) g");
    List<CheckedKey> keys =
        List.of(
            key(
                "kb.issues",
                "project_id",
                "kb.projects",
                OnDelete.ASYNC_DELETE,
                "main",
                "main",
                "bigint"));
    LfkSettings s = settings(1000, 100_000, 3, Duration.ofSeconds(1), 2);
    try (LfkHarness h = new LfkHarness(infra, dir, "lfk27", dbs, Map.of(), s, keys);
        Connection holder = h.db("main").getConnection()) {
      // The project is replaced in one transaction, then the application holds its new row.
      try (Connection c = h.db("main").getConnection()) {
        c.setAutoCommit(false);
        try (Statement st = c.createStatement()) {
          st.execute("DELETE FROM kb.projects WHERE id = 1");
          st.execute("INSERT INTO kb.projects VALUES (1)");
        }
        holder.setAutoCommit(false);
        c.commit();
      }
      try (Statement st = holder.createStatement()) {
        st.execute("SELECT 1 FROM kb.projects WHERE id = 1 FOR SHARE");
      }
      // The row's xmax names the locking session, still running; the delete's own transaction
      // ended: the key is back, whoever locks it.
      await()
          .atMost(WAIT)
          .untilAsserted(
              () -> assertThat(processed(h.pipeline.metrics(), "main/kb.projects")).isEqualTo(1));
      assertThat(counts(h.pipeline.metrics(), "main/kb.projects").incremented())
          .as("taken at once, not run again")
          .isZero();
      assertThat(h.count("main", "SELECT count(*) FROM kb.issues")).isEqualTo(10);
      holder.rollback();
    } finally {
      LfkHarness.dropSlots(infra, dbs, "lfk27");
    }
  }

  @Test
  void should_not_take_a_wait_for_the_applications_row_for_the_databases_latency()
      throws Exception {
    Map<String, String> dbs = Map.of("main", "lfk_main");
    seed(
        "lfk_main",
        "ll",
        "CREATE TABLE ll.projects (id bigint PRIMARY KEY)",
        "CREATE TABLE ll.issues (id bigint PRIMARY KEY, project_id bigint)",
        "INSERT INTO ll.projects VALUES (1)",
        "INSERT INTO ll.issues SELECT g, 1 FROM generate_series(1, 10) g");
    List<CheckedKey> keys =
        List.of(
            key(
                "ll.issues",
                "project_id",
                "ll.projects",
                OnDelete.ASYNC_DELETE,
                "main",
                "main",
                "bigint"));
    LfkSettings s = settings(1000, 100_000, 2, Duration.ofSeconds(1), 2);
    try (LfkHarness h = new LfkHarness(infra, dir, "lfk26", dbs, Map.of(), s, keys, "10s");
        var app = infra.databases("lfk_main");
        Connection holder = app.dataSource("lfk_main").getConnection()) {
      holder.setAutoCommit(false);
      try (Statement st = holder.createStatement()) {
        st.execute("SELECT * FROM ll.issues WHERE id = 1 FOR UPDATE");
      }
      TestSql.exec(h.db("main"), "DELETE FROM ll.projects");
      // The row's lock waited for over a second, within the lock timeout, then let go.
      await()
          .atMost(WAIT)
          .until(
              () ->
                  h.count(
                          "main",
                          "SELECT count(*) FROM pg_stat_activity WHERE application_name ="
                              + " 'spillway' AND wait_event_type = 'Lock' AND clock_timestamp()"
                              + " - query_start > interval '1200 ms'")
                      == 1);
      holder.rollback();
      await().atMost(WAIT).until(() -> h.count("main", "SELECT count(*) FROM ll.issues") == 0);

      assertThat(h.runtime.latency("main").p95Seconds())
          .as("the sub-batches' p95 (of a few, their slowest), the wait left out, in seconds")
          .isLessThan(1.0);
    } finally {
      LfkHarness.dropSlots(infra, dbs, "lfk26");
    }
  }

  @Test
  void should_give_up_waiting_for_a_row_an_application_locks_and_clean_it_once_let_go()
      throws Exception {
    Map<String, String> dbs = Map.of("main", "lfk_main");
    seed(
        "lfk_main",
        "lk",
        "CREATE TABLE lk.projects (id bigint PRIMARY KEY)",
        "CREATE TABLE lk.issues (id bigint PRIMARY KEY, project_id bigint)",
        "INSERT INTO lk.projects VALUES (1)",
        "INSERT INTO lk.issues SELECT g, 1 FROM generate_series(1, 10) g");
    List<CheckedKey> keys =
        List.of(
            key(
                "lk.issues",
                "project_id",
                "lk.projects",
                OnDelete.ASYNC_DELETE,
                "main",
                "main",
                "bigint"));
    // Three retries 100 ms apart: a lock wait given up and taken for a failure would see the
    // batch dead-lettered within two seconds, and the locked row never cleaned. Runs that give
    // up a wait are 100 ms apart, then 200 ms, and so on up to the 1 s delay.
    LfkSettings s = settings(1000, 100_000, 2, Duration.ofSeconds(1), 2);
    try (LfkHarness h = new LfkHarness(infra, dir, "lfk8", dbs, Map.of(), s, keys, "300ms");
        var app = infra.databases("lfk_main");
        Connection holder = app.dataSource("lfk_main").getConnection()) {
      holder.setAutoCommit(false);
      try (Statement st = holder.createStatement()) {
        st.execute("SELECT * FROM lk.issues WHERE id = 1 FOR UPDATE");
      }
      TestSql.exec(h.db("main"), "DELETE FROM lk.projects");
      await().atMost(WAIT).until(() -> h.count("main", "SELECT count(*) FROM lk.issues") == 1);

      // The application keeps its row for 5 s: Spillway's statements wait for it, each at most
      // the lock timeout, never holding their place in the table's lock queue for long.
      AtomicLong longestWaitMillis = new AtomicLong();
      AtomicInteger waitsSeen = new AtomicInteger();
      await()
          .during(Duration.ofSeconds(5))
          .atMost(Duration.ofSeconds(10))
          .pollInterval(Duration.ofMillis(20))
          .alias("no wait for the row as long as a second")
          .until(
              () -> {
                long waiting =
                    h.count(
                        "main",
                        "SELECT coalesce(max(extract(epoch FROM clock_timestamp() - query_start)"
                            + " * 1000), -1)::bigint FROM pg_stat_activity"
                            + " WHERE application_name = 'spillway' AND wait_event_type = 'Lock'");
                if (waiting >= 0) {
                  waitsSeen.incrementAndGet();
                  longestWaitMillis.accumulateAndGet(waiting, Math::max);
                }
                return waiting < 1_000;
              });
      assertThat(waitsSeen).as("samples of cleanup waiting for the row").hasPositiveValue();
      assertThat(longestWaitMillis.get()).as("longest wait for the row, ms").isLessThan(1_000);
      assertThat(
              h.runtime
                  .registry()
                  .get("spillway_sink_lock_timeouts")
                  .tags("pipeline", "lfk", "database", "main", "table", "lk.issues")
                  .counter()
                  .count())
          .as("runs that gave up the wait")
          .isGreaterThanOrEqualTo(2);
      assertThat(counts(h.pipeline.metrics(), "main/lk.projects").incremented())
          .as("cleanup attempts are not spent on a lock")
          .isZero();
      assertThat(h.count("main", "SELECT count(*) FROM lk.issues")).isEqualTo(1);

      holder.rollback();
      await()
          .atMost(WAIT)
          .untilAsserted(
              () -> {
                assertThat(h.count("main", "SELECT count(*) FROM lk.issues")).isZero();
                assertThat(processed(h.pipeline.metrics(), "main/lk.projects")).isEqualTo(1);
              });
    } finally {
      LfkHarness.dropSlots(infra, dbs, "lfk8");
    }
  }

  @Test
  void should_clean_a_small_parent_while_a_huge_one_is_still_being_cleaned() throws Exception {
    Map<String, String> dbs = Map.of("main", "lfk_main");
    seed(
        "lfk_main",
        "d",
        "CREATE TABLE d.namespaces (id bigint PRIMARY KEY)",
        "CREATE TABLE d.routes (id bigserial PRIMARY KEY, namespace_id bigint)",
        "CREATE INDEX ON d.routes (namespace_id)",
        "CREATE TABLE d.tags (id bigint PRIMARY KEY)",
        "CREATE TABLE d.taggings (id bigserial PRIMARY KEY, tag_id bigint)",
        "INSERT INTO d.namespaces VALUES (1)",
        "INSERT INTO d.routes (namespace_id) SELECT 1 FROM generate_series(1, 200000) g",
        "INSERT INTO d.tags VALUES (1)",
        "INSERT INTO d.taggings (tag_id) SELECT 1 FROM generate_series(1, 5) g");
    List<CheckedKey> keys =
        List.of(
            key(
                "d.routes",
                "namespace_id",
                "d.namespaces",
                OnDelete.ASYNC_DELETE,
                "main",
                "main",
                "bigint"),
            key("d.taggings", "tag_id", "d.tags", OnDelete.ASYNC_DELETE, "main", "main", "bigint"));
    // One batch at a time, 1,000 deletes a run: the huge parent needs 200 runs.
    LfkSettings s = settings(500, 1000, 1000, Duration.ofSeconds(1), 1);
    try (LfkHarness h = new LfkHarness(infra, dir, "lfk4", dbs, Map.of(), s, keys)) {
      TestSql.exec(h.db("main"), "DELETE FROM d.namespaces");
      await().atMost(WAIT).until(() -> h.count("main", "SELECT count(*) FROM d.routes") < 200_000);
      TestSql.exec(h.db("main"), "DELETE FROM d.tags");
      await()
          .atMost(WAIT)
          .untilAsserted(
              () -> assertThat(h.count("main", "SELECT count(*) FROM d.taggings")).isZero());
      assertThat(h.count("main", "SELECT count(*) FROM d.routes")).isPositive();
    } finally {
      LfkHarness.dropSlots(infra, dbs, "lfk4");
    }
  }

  @Test
  void should_lose_nothing_when_a_worker_dies_in_the_middle_of_a_cleanup() throws Exception {
    Map<String, String> dbs = Map.of("main", "lfk_main");
    seed(
        "lfk_main",
        "e",
        "CREATE TABLE e.groups (id bigint PRIMARY KEY)",
        "CREATE TABLE e.members (id bigserial PRIMARY KEY, group_id bigint)",
        "CREATE INDEX ON e.members (group_id)",
        "INSERT INTO e.groups SELECT g FROM generate_series(1, 20) g",
        "INSERT INTO e.members (group_id) SELECT 1 + g % 20 FROM generate_series(1, 100000) g");
    CheckedKey k =
        key("e.members", "group_id", "e.groups", OnDelete.ASYNC_DELETE, "main", "main", "bigint");
    LfkSettings s = settings(100, 100_000, 3, Duration.ofSeconds(1), 2);
    try (LfkHarness h = new LfkHarness(infra, dir, "lfk5", dbs, Map.of(), s, List.of(k))) {
      TestSql.exec(h.db("main"), "DELETE FROM e.groups");
      await().atMost(WAIT).until(() -> h.count("main", "SELECT count(*) FROM e.members") < 100_000);
      // The worker dies without settling its batch: nothing committed, nothing released.
      h.runtime.sink(Pipeline.LFK).orElseThrow().close(Duration.ZERO);
      long left = h.count("main", "SELECT count(*) FROM e.members");
      assertThat(left).isPositive();
      LfkMetrics metrics =
          new LfkMetrics(new io.micrometer.core.instrument.simple.SimpleMeterRegistry());
      try (Sink replacement =
          Sink.start(
              Pipeline.LFK,
              h.runtime.topics().cleanupBatches(),
              new LfkCleanup(List.of(k), s, metrics),
              s.sink(),
              h.runtime.sinkWiring())) {
        await()
            .atMost(WAIT)
            .untilAsserted(
                () -> assertThat(h.count("main", "SELECT count(*) FROM e.members")).isZero());
        await()
            .atMost(WAIT)
            .untilAsserted(
                () ->
                    assertThat(
                            processed(metrics, "main/e.groups")
                                + processed(h.pipeline.metrics(), "main/e.groups"))
                        .isEqualTo(20));
      }
    } finally {
      LfkHarness.dropSlots(infra, dbs, "lfk5");
    }
  }
}
