package dev.spillway.bench;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.spillway.jdbc.DatabaseEndpoint;
import dev.spillway.jdbc.Databases;
import dev.spillway.testing.EmbeddedInfra;
import dev.spillway.testing.TestSql;
import java.time.Duration;
import java.util.List;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The benchmark's clients in a process of their own, against the embedded PostgreSQL. */
class InsertLoadIT {
  private static final Duration WAIT = Duration.ofSeconds(30);

  private DatabaseEndpoint db;
  private Databases databases;
  private DataSource ds;
  private String table;
  private String insert;

  @BeforeEach
  void setUp() {
    EmbeddedInfra infra = EmbeddedInfra.get();
    db = infra.database("bench");
    databases = infra.databases("bench");
    ds = databases.dataSource("bench");
    table = TestSql.uniqueName("load");
    insert = "INSERT INTO " + table + " (contact_id) VALUES (?)";
    TestSql.exec(ds, "CREATE TABLE " + table + " (id bigserial PRIMARY KEY, contact_id bigint)");
  }

  @AfterEach
  void tearDown() {
    TestSql.exec(ds, "DROP TABLE " + table);
    databases.close();
  }

  @Test
  void should_insert_at_the_rate_asked_and_report_every_insert_and_its_latency() throws Exception {
    InsertLoad.Result r;
    try (InsertLoad load = new InsertLoad(db, insert, 2, 200, List.of())) {
      load.start();
      await().atMost(WAIT).until(() -> TestSql.count(ds, "SELECT count(*) FROM " + table) >= 300);
      r = load.stop();
    }

    assertThat(TestSql.count(ds, "SELECT count(*) FROM " + table))
        .as("rows in the table")
        .isEqualTo(r.inserts());
    assertThat(r.latency().p50()).as("p50 latency, µs").isPositive();
    assertThat(r.latency().p99()).as("p99 latency, µs").isGreaterThanOrEqualTo(r.latency().p50());
    assertThat(r.latency().mean()).as("mean latency, µs").isPositive();
    assertThat(r.tps()).as("inserts per second, paced at 200").isBetween(180.0, 205.0);
    assertThat(r.cpuSeconds()).isPositive();
  }

  @Test
  void should_report_latencies_that_hold_the_time_each_insert_took() throws Exception {
    TestSql.exec(
        ds,
        "CREATE FUNCTION "
            + table
            + "_slow() RETURNS trigger LANGUAGE plpgsql AS"
            + " $$BEGIN PERFORM pg_sleep(0.02); RETURN NEW; END$$",
        "CREATE TRIGGER slow BEFORE INSERT ON "
            + table
            + " FOR EACH ROW EXECUTE FUNCTION "
            + table
            + "_slow()");
    InsertLoad.Result r;
    try (InsertLoad load = new InsertLoad(db, insert, 1, 0, List.of())) {
      load.start(); // its warm-up inserts go to a table of its own, without the trigger
      await().atMost(WAIT).until(() -> TestSql.count(ds, "SELECT count(*) FROM " + table) >= 20);
      r = load.stop();
    } finally {
      TestSql.exec(ds, "DROP FUNCTION " + table + "_slow() CASCADE");
    }

    // Every insert waits 20 ms in its trigger: one client cannot do more than 50 a second.
    assertThat(r.latency().p50()).as("p50 latency, µs").isBetween(20_000L, 500_000L);
    assertThat(r.latency().p99()).as("p99 latency, µs").isBetween(r.latency().p50(), 1_000_000L);
    assertThat(r.latency().mean()).as("mean latency, µs").isGreaterThanOrEqualTo(20_000);
    assertThat(r.tps()).as("inserts per second").isPositive().isLessThanOrEqualTo(50.0);
  }

  @Test
  void should_end_its_clients_when_closed_without_being_stopped() throws Exception {
    String inserting = "INSERT INTO " + table + " ";
    try (InsertLoad load = new InsertLoad(db, insert, 2, 200, List.of())) {
      load.start();
      await().atMost(WAIT).until(() -> TestSql.sessions(ds, inserting, "true") == 2);
    } // as when a phase fails between start and stop
    await().atMost(WAIT).until(() -> TestSql.sessions(ds, inserting, "true") == 0);
  }

  @Test
  void should_say_why_when_its_clients_fail() throws Exception {
    String rollbacks =
        "SELECT xact_rollback FROM pg_stat_database WHERE datname = current_database()";
    long before = TestSql.count(ds, rollbacks);
    try (InsertLoad load =
        new InsertLoad(db, "INSERT INTO no_such_table VALUES (?)", 1, 0, List.of())) {
      load.start();
      // The client's failed insert ends its transaction and then its connection, whose
      // statistics reach pg_stat_database as it closes.
      await().atMost(WAIT).until(() -> TestSql.count(ds, rollbacks) > before);
      assertThatThrownBy(load::stop)
          .isInstanceOf(IllegalStateException.class)
          .hasMessageStartingWith("The insert load failed: ")
          .hasMessageContaining("no_such_table");
    }
  }
}
