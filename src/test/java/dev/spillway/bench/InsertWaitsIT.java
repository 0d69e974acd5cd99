package dev.spillway.bench;

import static org.assertj.core.api.Assertions.assertThat;

import dev.spillway.jdbc.Databases;
import dev.spillway.testing.EmbeddedInfra;
import dev.spillway.testing.TestSql;
import java.sql.Connection;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;

/** Sampling what one statement's backends wait on, against the embedded PostgreSQL. */
class InsertWaitsIT {

  @Test
  void should_count_what_the_sampled_statement_waits_on_and_not_what_another_waits_on_meanwhile()
      throws Exception {
    EmbeddedInfra infra = EmbeddedInfra.get();
    String table = TestSql.uniqueName("waits");
    try (Databases databases = infra.databases("bench")) {
      DataSource ds = databases.dataSource("bench");
      TestSql.exec(ds, "CREATE TABLE " + table + " (v text)");
      String other = table + "_other";
      TestSql.exec(ds, "CREATE TABLE " + other + " (v text)");
      String insert = "INSERT INTO " + table + " ";

      Map<String, Long> counted;
      // A statement that is not the one sampled waits on a lock the whole time...
      try (Connection locker = TestSql.lockTable(ds, other)) {
        String select = "SELECT count(*) FROM " + other;
        CompletableFuture<Void> blocked =
            CompletableFuture.runAsync(() -> TestSql.exec(ds, select));
        TestSql.awaitWaitingOnLock(ds, select);
        // ...while an insert that sleeps 1 s inside the server is sampled.
        InsertWaits waits = new InsertWaits(ds, insert);
        waits.start();
        TestSql.exec(ds, insert + "SELECT pg_sleep(1)::text");
        counted = waits.stop();
        locker.rollback();
        blocked.get(30, TimeUnit.SECONDS);
      }

      long total = counted.values().stream().mapToLong(Long::longValue).sum();
      assertThat(counted).containsKey("Timeout:PgSleep").doesNotContainKey("Lock:relation");
      assertThat(counted.get("Timeout:PgSleep"))
          .as("samples of the sleeping insert, of %s in all", counted)
          .isGreaterThanOrEqualTo(20L)
          .isGreaterThanOrEqualTo(total * 9 / 10);
      TestSql.exec(ds, "DROP TABLE " + table + ", " + other);
    }
  }
}
