package dev.spillway.lfk;

import static dev.spillway.config.DatabaseConfig.DEFAULT_LOCK_TIMEOUT;
import static dev.spillway.lfk.LfkHarness.key;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.spillway.jdbc.Databases;
import dev.spillway.testing.EmbeddedInfra;
import dev.spillway.testing.TestSql;
import java.sql.Connection;
import java.time.Duration;
import java.util.List;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The sweep under a role with less than a superuser's rights, on the shared embedded PostgreSQL:
 * rows row security hides from it, and sessions it may not see, never make a parent look deleted.
 */
class OrphanSweepIT {
  private static final String DB = "sweep_roles";
  private static final String ROLE = "sweep_reader";

  private Databases admin;
  private DataSource ds;

  @BeforeEach
  void setUp() {
    admin = EmbeddedInfra.get().databases(DB);
    ds = admin.dataSource(DB);
    TestSql.exec(
        ds,
        "DROP SCHEMA IF EXISTS r CASCADE",
        "DROP ROLE IF EXISTS " + ROLE,
        "CREATE SCHEMA r",
        "CREATE TABLE r.projects (id bigint PRIMARY KEY)",
        "CREATE TABLE r.issues (id bigserial PRIMARY KEY, project_id bigint)",
        "CREATE INDEX ON r.issues (project_id)",
        "INSERT INTO r.projects VALUES (1), (150)",
        "INSERT INTO r.issues (project_id) VALUES (1), (150), (7)",
        "CREATE ROLE " + ROLE + " LOGIN PASSWORD 'pw'",
        "GRANT USAGE ON SCHEMA r TO " + ROLE,
        "GRANT SELECT ON ALL TABLES IN SCHEMA r TO " + ROLE);
  }

  @AfterEach
  void tearDown() {
    TestSql.exec(ds, "DROP SCHEMA r CASCADE", "DROP OWNED BY " + ROLE, "DROP ROLE " + ROLE);
    admin.close();
  }

  private Databases asReader() {
    return asReader(DEFAULT_LOCK_TIMEOUT);
  }

  private Databases asReader(Duration lockTimeout) {
    return TestSql.databasesAs(admin.endpoint(DB), "main", ROLE, lockTimeout);
  }

  private static List<CheckedKey> keys() {
    return List.of(
        key(
            "r.issues",
            "project_id",
            "r.projects",
            OnDelete.ASYNC_DELETE,
            "main",
            "main",
            "bigint"));
  }

  @Test
  void should_fail_rather_than_take_rows_row_security_hides_for_deleted_ones() throws Exception {
    TestSql.exec(
        ds,
        "ALTER TABLE r.projects ENABLE ROW LEVEL SECURITY",
        "CREATE POLICY small ON r.projects USING (id < 100)",
        "GRANT pg_read_all_stats TO " + ROLE);
    try (Databases reader = asReader()) {
      assertThatThrownBy(
              () -> OrphanSweep.find(keys(), reader::dataSource, 1000, Duration.ZERO, d -> {}))
          .hasMessageContaining("row-level security");
    }
  }

  @Test
  void should_refuse_when_it_may_not_see_other_sessions_and_sweep_once_it_may() throws Exception {
    try (Databases reader = asReader();
        Connection other = ds.getConnection()) {
      // Another role's session in the database, whose transaction the reader may not see.
      other.createStatement().execute("SELECT 1");
      assertThatThrownBy(
              () -> OrphanSweep.find(keys(), reader::dataSource, 1000, Duration.ZERO, d -> {}))
          .isInstanceOf(OrphanSweep.SweepException.class)
          .hasMessageStartingWith("Spillway's role may not see the transactions of ")
          .hasMessageEndingWith(
              " of database main (or track_activities is off for them), so it cannot tell whether"
                  + " one is writing a parent row it would take for a deleted one; nothing was"
                  + " handed over: grant it pg_read_all_stats.");

      TestSql.exec(ds, "GRANT pg_read_all_stats TO " + ROLE);
      OrphanSweep.Result found =
          OrphanSweep.find(keys(), reader::dataSource, 1000, Duration.ZERO, d -> {});
      assertThat(found.deleted().values()).containsExactly(List.of("7"));
    }
  }

  @Test
  void should_give_up_a_lock_wait_behind_a_schema_change_with_one_sentence() throws Exception {
    TestSql.exec(ds, "GRANT pg_read_all_stats TO " + ROLE);
    try (Databases reader = asReader(Duration.ofMillis(200));
        Connection migration = TestSql.lockTable(ds, "r.issues")) {
      assertThatThrownBy(
              () -> OrphanSweep.find(keys(), reader::dataSource, 1000, Duration.ZERO, d -> {}))
          .isInstanceOf(OrphanSweep.SweepException.class)
          .hasMessage(
              "A statement sweeping r.issues.project_id → r.projects (async_delete) waited for a"
                  + " lock on its tables past the database's lock-timeout (a schema change holding them?);"
                  + " nothing was handed over: sweep again once it is done.");
    }
  }
}
