package dev.spillway.bench;

import static org.assertj.core.api.Assertions.assertThat;

import dev.spillway.jdbc.Databases;
import dev.spillway.testing.EmbeddedInfra;
import dev.spillway.testing.TestSql;
import java.util.Map;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;

/** Sampling what one statement's backends wait on, against the embedded PostgreSQL. */
class InsertWaitsIT {

  @Test
  void should_count_what_the_sampled_statement_waits_on_and_no_other_statement() throws Exception {
    EmbeddedInfra infra = EmbeddedInfra.get();
    String table = TestSql.uniqueName("waits");
    try (Databases databases = infra.databases("bench")) {
      DataSource ds = databases.dataSource("bench");
      TestSql.exec(ds, "CREATE TABLE " + table + " (v text)");
      String insert = "INSERT INTO " + table + " ";

      // A statement that is not the one sampled is not counted.
      InsertWaits notSampled = new InsertWaits(ds, insert);
      notSampled.start();
      TestSql.exec(ds, "SELECT pg_sleep(1)");
      assertThat(notSampled.stop()).isEmpty();

      // An insert that sleeps 1 s inside the server is counted under its wait event.
      InsertWaits sampled = new InsertWaits(ds, insert);
      sampled.start();
      TestSql.exec(ds, insert + "SELECT pg_sleep(1)::text");
      Map<String, Long> counted = sampled.stop();
      long total = counted.values().stream().mapToLong(Long::longValue).sum();
      assertThat(counted).containsKey("Timeout:PgSleep");
      assertThat(counted.get("Timeout:PgSleep"))
          .as("samples of the sleeping insert, of %s in all", counted)
          .isGreaterThanOrEqualTo(20L)
          .isGreaterThanOrEqualTo(total * 9 / 10);
      TestSql.exec(ds, "DROP TABLE " + table);
    }
  }
}
