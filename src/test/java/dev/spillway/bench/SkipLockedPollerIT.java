package dev.spillway.bench;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.spillway.jdbc.Databases;
import dev.spillway.testing.EmbeddedInfra;
import dev.spillway.testing.TestSql;
import java.sql.Connection;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The document's design the buffers benchmark compares against, on the embedded PostgreSQL. */
class SkipLockedPollerIT {

  private Databases databases;
  private DataSource ds;
  private String table;

  /** A table with the columns the poller reads and writes, and the index its delete uses. */
  @BeforeEach
  void setUp() {
    databases = EmbeddedInfra.get().databases("bench");
    ds = databases.dataSource("bench");
    table = TestSql.uniqueName("polled");
    TestSql.exec(
        ds,
        "CREATE TABLE "
            + table
            + " (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
            + " created_at timestamptz NOT NULL DEFAULT clock_timestamp(), group_id uuid)",
        "CREATE INDEX ON " + table + " (group_id)");
  }

  @AfterEach
  void tearDown() {
    TestSql.exec(ds, "DROP TABLE " + table);
    databases.close();
  }

  @Test
  void should_claim_every_row_in_groups_and_delete_it() throws Exception {
    TestSql.exec(
        ds,
        "INSERT INTO "
            + table
            + " (created_at) SELECT clock_timestamp() FROM generate_series(1, 2500)");
    // Each deleted row's id and group, as it leaves the table.
    String deleted = table + "_deleted";
    TestSql.exec(ds, "CREATE TABLE " + deleted + " (id bigint, group_id uuid)");
    TestSql.exec(
        ds,
        "CREATE FUNCTION "
            + deleted
            + "_log() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO "
            + deleted
            + " VALUES (OLD.id, OLD.group_id); RETURN OLD; END $$");
    TestSql.exec(
        ds,
        "CREATE TRIGGER log_delete BEFORE DELETE ON "
            + table
            + " FOR EACH ROW EXECUTE FUNCTION "
            + deleted
            + "_log()");
    // Four claimers taking groups of at most 100 rows from the same table.
    SkipLockedPoller poller = new SkipLockedPoller(ds, table, 100, 4, 10, 30);
    poller.start();
    await()
        .atMost(Duration.ofSeconds(30))
        .until(() -> TestSql.count(ds, "SELECT count(*) FROM " + table) == 0);
    Samples latencies = poller.stop();

    assertThat(latencies.size()).as("one latency per row deleted").isEqualTo(2500);
    assertThat(TestSql.count(ds, "SELECT count(*) FROM " + deleted))
        .as("rows deleted")
        .isEqualTo(2500);
    assertThat(TestSql.count(ds, "SELECT count(*) FROM " + deleted + " WHERE group_id IS NULL"))
        .as("rows deleted without a group")
        .isZero();
    assertThat(
            TestSql.count(
                ds,
                "SELECT max(n) FROM (SELECT count(*) AS n FROM "
                    + deleted
                    + " GROUP BY group_id) g"))
        .as("largest group")
        .isBetween(1L, 100L);
    TestSql.exec(ds, "DROP TABLE " + deleted);
    TestSql.exec(ds, "DROP FUNCTION " + deleted + "_log() CASCADE");
  }

  @Test
  void should_fail_with_the_reason_when_a_claim_runs_past_its_timeout() throws Exception {
    // Another session holds the table, so the claim's first statement waits.
    try (Connection locker = TestSql.lockTable(ds, table)) {
      SkipLockedPoller poller = new SkipLockedPoller(ds, table, 100, 1, 10, 5);
      poller.start();
      TestSql.awaitWaitingOnLock(ds, "SELECT id FROM " + table);
      // The timeout cancels the claim; the claimer ends and stop() says why (without the
      // timeout, stop() would wait as long as the lock is held).
      CompletableFuture<Samples> stopped =
          CompletableFuture.supplyAsync(
              () -> {
                try {
                  return poller.stop();
                } catch (InterruptedException e) {
                  throw new IllegalStateException(e);
                }
              });
      assertThatThrownBy(() -> stopped.get(30, TimeUnit.SECONDS))
          .isInstanceOf(ExecutionException.class)
          .hasCauseInstanceOf(IllegalStateException.class)
          .hasMessageContaining("The SKIP LOCKED poller failed")
          .hasMessageContaining("canceling statement");
      locker.rollback();
    }
  }
}
