package dev.spillway.health;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.spillway.event.TableName;
import dev.spillway.jdbc.Databases;
import dev.spillway.testing.EmbeddedInfra;
import dev.spillway.testing.TestSql;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Clock;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.postgresql.PGConnection;
import org.postgresql.PGProperty;
import org.postgresql.ds.PGSimpleDataSource;
import org.postgresql.replication.LogSequenceNumber;
import org.postgresql.replication.PGReplicationStream;

/** The monitor's own connection to a real PostgreSQL. */
class HealthMonitorIT {
  private static final String DB = "health";
  private static final TableName WATCHED = new TableName("public", "watched");
  private static final String ACTIVITY = "SELECT count(*) FROM pg_stat_activity";

  @Test
  void should_keep_one_connection_and_open_another_when_it_is_ended_without_stopping_work() {
    try (Databases databases = EmbeddedInfra.get().databases(DB);
        HealthMonitor monitor =
            new HealthMonitor(
                new HealthMonitor.Settings(
                    Duration.ofSeconds(1), Duration.ofSeconds(30), HealthThresholds.defaults()),
                Map.of(DB, databases.unpooledSource(DB)),
                Clock.systemUTC(),
                new SimpleMeterRegistry())) {
      DataSource ds = checks(databases);
      monitor.addIndicators(DB, List.of(new Reads()));
      monitor.runOnce();
      assertThat(monitor.state(DB, null)).isEqualTo(Health.NORMAL);
      long first = monitorBackend(ds);
      monitor.runOnce();
      assertThat(monitorBackend(ds)).as("the same connection, kept").isEqualTo(first);

      // An operator (or a pooler's idle limit) ends it between two samples.
      TestSql.exec(ds, "SELECT pg_terminate_backend(" + first + ", 10000)"); // until it is gone
      monitor.runOnce();

      assertThat(monitor.state(DB, null)).isEqualTo(Health.NORMAL);
      assertThat(monitorBackend(ds)).isNotEqualTo(first);
    }
  }

  @Test
  void should_publish_each_database_on_time_while_another_does_not_answer() throws Exception {
    // A server that takes connections and never answers: the monitor's login waits its 8 s each
    // time, as behind a network that drops packets.
    try (ServerSocket silent = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        Databases databases = EmbeddedInfra.get().databases(DB);
        HealthMonitor monitor =
            new HealthMonitor(
                new HealthMonitor.Settings(
                    Duration.ofMillis(100), Duration.ofSeconds(30), HealthThresholds.defaults()),
                databases(silent, databases),
                Clock.systemUTC(),
                new SimpleMeterRegistry())) {
      ManualIndicator operator = new ManualIndicator();
      operator.set(new Health.Throttle("an operator's switch"));
      monitor.addIndicators(DB, List.of(operator));

      monitor.start();

      await()
          .atMost(Duration.ofSeconds(4))
          .untilAsserted(() -> assertThat(monitor.state(DB, null).label()).isEqualTo("THROTTLE"));
      await()
          .atMost(Duration.ofSeconds(20))
          .untilAsserted(
              () ->
                  assertThat(monitor.state("silent", null).reason())
                      .startsWith("database silent unreachable"));
      operator.set(new Health.Stop("an operator's switch"));
      await()
          .atMost(Duration.ofSeconds(4))
          .untilAsserted(() -> assertThat(monitor.state(DB, null).label()).isEqualTo("STOP"));
    }
  }

  @Test
  void should_read_unknown_what_the_role_may_not_see_until_it_is_granted_pg_monitor() {
    String role = "plain" + Long.toHexString(System.nanoTime());
    try (Databases databases = EmbeddedInfra.get().databases(DB)) {
      DataSource admin = checks(databases);
      TestSql.exec(
          admin,
          "CREATE ROLE " + role + " LOGIN",
          "CREATE TABLE IF NOT EXISTS public.watched (id bigint PRIMARY KEY)");
      PGSimpleDataSource asRole = new PGSimpleDataSource();
      asRole.setURL(databases.endpoint(DB).url());
      asRole.setUser(role);
      TableName table = new TableName("public", "watched");
      try {
        assertThat(sample(asRole, table))
            .as("read as nothing amiss before")
            .containsEntry(
                "autovacuum",
                new Health.Unknown(
                    "autovacuum: Spillway's role may not see autovacuum workers (it needs"
                        + " pg_read_all_stats: GRANT pg_monitor TO it)"))
            .containsEntry(
                "replication-lag",
                new Health.Unknown(
                    "replication-lag: Spillway's role may not see standbys' replay lag (it needs"
                        + " pg_read_all_stats: GRANT pg_monitor TO it)"))
            .containsEntry(
                "locks",
                new Health.Unknown(
                    "locks: Spillway's role may not see how long other roles' transactions have"
                        + " held locks (it needs pg_read_all_stats: GRANT pg_monitor TO it)"));

        TestSql.exec(admin, "GRANT pg_monitor TO " + role);

        assertThat(sample(asRole, table))
            .containsEntry("autovacuum", Health.NORMAL)
            .containsEntry("replication-lag", Health.NORMAL)
            .containsEntry("locks", Health.NORMAL);
      } finally {
        TestSql.exec(admin, "DROP ROLE " + role);
      }
    }
  }

  @Test
  void should_leave_a_standby_named_in_replication_lag_ignore_out_of_the_lag() throws Exception {
    try (Databases databases = EmbeddedInfra.get().databases(DB)) {
      DataSource ds = checks(databases);
      DataSource monitored = databases.unpooledSource(DB);
      try (Connection standby = standbyStuckAtTheCurrentPosition(databases, "kept_behind")) {
        // 2 MB of WAL the standby never says it replayed, as one delayed on purpose.
        // (A message in a transaction, whose commit writes it out: pg_current_wal_lsn moves on.)
        TestSql.exec(ds, "SELECT pg_logical_emit_message(true, 'test', repeat('x', 2 << 20))");

        Health counted =
            sample(
                    monitored,
                    WATCHED,
                    Thresholds.replicationLagBytes(256 << 10, 1 << 20, List.of()))
                .get("replication-lag");
        Health ignored =
            sample(
                    monitored,
                    WATCHED,
                    Thresholds.replicationLagBytes(256 << 10, 1 << 20, List.of("kept_behind")))
                .get("replication-lag");

        assertThat(counted.label()).isEqualTo("STOP");
        // At least the 2 MB it never replayed (other sessions may write more meanwhile).
        assertThat(counted.reason()).matches("replication-lag: standby replay lag .* s, \\d+ MB");
        assertThat(Long.parseLong(counted.reason().replaceAll(".* (\\d+) MB$", "$1")))
            .isGreaterThanOrEqualTo(2);
        assertThat(ignored).isEqualTo(Health.NORMAL);
      }
      // Gone, its connection closed, before another test reads the shared server's standbys.
      await()
          .atMost(Duration.ofSeconds(30))
          .until(
              () ->
                  TestSql.count(
                          ds,
                          "SELECT count(*) FROM pg_stat_replication"
                              + " WHERE application_name = 'kept_behind'")
                      == 0);
    }
  }

  /**
   * A physical replication stream named {@code name} that reports the current WAL position as
   * replayed once and reads nothing after: pg_stat_replication shows it as a standby falling behind
   * until its connection, returned, is closed.
   */
  private static Connection standbyStuckAtTheCurrentPosition(Databases databases, String name)
      throws SQLException {
    Properties props = new Properties();
    PGProperty.USER.set(props, databases.endpoint(DB).username());
    PGProperty.REPLICATION.set(props, "true");
    PGProperty.ASSUME_MIN_SERVER_VERSION.set(props, "10"); // else the driver leaves replication out
    PGProperty.PREFER_QUERY_MODE.set(props, "simple");
    PGProperty.APPLICATION_NAME.set(props, name);
    Connection connection = DriverManager.getConnection(databases.endpoint(DB).url(), props);
    try {
      LogSequenceNumber now =
          LogSequenceNumber.valueOf(
              TestSql.text(checks(databases), "SELECT pg_current_wal_lsn()::text"));
      PGReplicationStream stream =
          connection
              .unwrap(PGConnection.class)
              .getReplicationAPI()
              .replicationStream()
              .physical()
              .withStartPosition(now)
              .start();
      stream.setFlushedLSN(now);
      stream.setAppliedLSN(now);
      stream.forceUpdateStatus();
      String reported =
          "SELECT count(*) FROM pg_stat_replication WHERE application_name = '"
              + name
              + "' AND replay_lsn IS NOT NULL";
      await()
          .atMost(Duration.ofSeconds(10))
          .until(() -> TestSql.count(checks(databases), reported) == 1);
      return connection;
    } catch (SQLException | RuntimeException e) {
      connection.close();
      throw e;
    }
  }

  @Test
  void should_count_client_connections_only_against_max_connections() {
    try (Databases databases = EmbeddedInfra.get().databases(DB)) {
      DataSource ds = checks(databases);
      TestSql.exec(ds, "CREATE TABLE IF NOT EXISTS public.watched (id bigint PRIMARY KEY)");
      long clients = TestSql.count(ds, ACTIVITY + " WHERE backend_type = 'client backend'");
      long others = TestSql.count(ds, ACTIVITY + " WHERE backend_type <> 'client backend'");
      long max = TestSql.count(ds, "SELECT current_setting('max_connections')::int");
      assertThat(others).as("the server's own processes in pg_stat_activity").isGreaterThan(4);

      // Between the clients alone and with the server's processes, with room for a session or two
      // coming or going, such as the monitor's own.
      double throttle = (clients + others / 2.0) / max;

      assertThat(sample(databases.unpooledSource(DB), WATCHED, Thresholds.connections(throttle, 1)))
          .containsEntry("connections", Health.NORMAL);
    }
  }

  @Test
  void should_leave_autovacuum_on_the_table_to_the_autovacuum_indicator() {
    TableName table = new TableName("public", TestSql.uniqueName("vacuumed"));
    try (Databases databases = EmbeddedInfra.get().databases(DB)) {
      DataSource ds = checks(databases);
      try {
        // Dead rows for autovacuum to clean, at its slowest: it holds its lock for minutes.
        TestSql.exec(
            ds,
            "CREATE TABLE "
                + table.quoted()
                + " (id bigint PRIMARY KEY, pad text)"
                + SLOWEST_AUTOVACUUM);
        TestSql.exec(ds, deadRows(table));
        awaitAutovacuumHolding(ds, table, Duration.ofSeconds(1));

        assertThat(
                sample(
                    databases.unpooledSource(DB),
                    table,
                    Thresholds.longTransaction(Duration.ofSeconds(1))))
            .containsEntry("locks", Health.NORMAL)
            .containsEntry(
                "autovacuum", new Health.Throttle("autovacuum: autovacuum runs on " + table));
      } finally {
        // Cancels the autovacuum worker, which gives way to the DROP's lock.
        TestSql.exec(ds, "DROP TABLE IF EXISTS " + table.quoted());
      }
    }
  }

  @Test
  void should_see_autovacuum_on_a_partition_of_a_partitioned_table() {
    TableName table = new TableName("public", TestSql.uniqueName("vacuumed_parts"));
    TableName partition = new TableName("public", table.table() + "_1");
    try (Databases databases = EmbeddedInfra.get().databases(DB)) {
      DataSource ds = checks(databases);
      try {
        // Autovacuum works on the partitions, never on the partitioned table itself.
        TestSql.exec(
            ds,
            "CREATE TABLE "
                + table.quoted()
                + " (id bigint PRIMARY KEY, pad text) PARTITION BY RANGE (id)",
            "CREATE TABLE "
                + partition.quoted()
                + " PARTITION OF "
                + table.quoted()
                + " FOR VALUES FROM (0) TO (100000)"
                + SLOWEST_AUTOVACUUM);
        TestSql.exec(ds, deadRows(table));
        awaitAutovacuumHolding(ds, partition, Duration.ofSeconds(1));

        assertThat(sample(databases.unpooledSource(DB), table))
            .containsEntry(
                "autovacuum", new Health.Throttle("autovacuum: autovacuum runs on " + table));
      } finally {
        TestSql.exec(ds, "DROP TABLE IF EXISTS " + table.quoted());
      }
    }
  }

  @Test
  void should_see_a_session_waiting_for_a_row_another_transaction_locked() throws Exception {
    TableName table = new TableName("public", TestSql.uniqueName("rows"));
    assertRowWaitSeen(table, "CREATE TABLE " + table.quoted() + " (id bigint PRIMARY KEY, n int)");
  }

  @Test
  void should_see_a_schema_change_waiting_on_a_partition_without_waiting_behind_it()
      throws Exception {
    TableName table = new TableName("public", TestSql.uniqueName("parted"));
    TableName partition = new TableName("public", table.table() + "_1");
    try (Databases databases = EmbeddedInfra.get().databases(DB)) {
      DataSource ds = checks(databases);
      TestSql.exec(
          ds,
          "CREATE TABLE " + table.quoted() + " (id bigint PRIMARY KEY) PARTITION BY RANGE (id)",
          "CREATE TABLE "
              + partition.quoted()
              + " PARTITION OF "
              + table.quoted()
              + " FOR VALUES FROM (0) TO (100)");
      // A transaction reading the partition; a column added to the table then holds the table
      // and waits for the partition, where anything else that locks it queues behind it.
      try (Connection holder =
          TestSql.inTransaction(ds, "SELECT count(*) FROM " + partition.quoted())) {
        CompletableFuture<Void> change =
            CompletableFuture.runAsync(
                () -> TestSql.exec(ds, "ALTER TABLE " + table.quoted() + " ADD COLUMN n int"));
        TestSql.awaitBlockedBy(ds, TestSql.pid(holder));

        assertThat(sample(databases.unpooledSource(DB), table))
            .containsEntry("autovacuum", Health.NORMAL)
            .containsEntry(
                "locks", new Health.Throttle("locks: 1 session(s) wait for locks on " + table));

        holder.rollback();
        change.get(30, TimeUnit.SECONDS);
      } finally {
        TestSql.exec(ds, "DROP TABLE " + table.quoted());
      }
    }
  }

  @Test
  void should_see_a_session_waiting_for_a_row_of_a_partition() throws Exception {
    TableName table = new TableName("public", TestSql.uniqueName("parted_rows"));
    assertRowWaitSeen(
        table,
        "CREATE TABLE "
            + table.quoted()
            + " (id bigint PRIMARY KEY, n int) PARTITION BY RANGE (id)",
        "CREATE TABLE "
            + new TableName("public", table.table() + "_1").quoted()
            + " PARTITION OF "
            + table.quoted()
            + " FOR VALUES FROM (0) TO (100)");
  }

  /**
   * A table made by {@code create}, with row 1 updated in a transaction left open and a second
   * update of it waiting: the locks indicator sees the waiting session on the table.
   */
  private static void assertRowWaitSeen(TableName table, String... create) throws Exception {
    try (Databases databases = EmbeddedInfra.get().databases(DB)) {
      DataSource ds = checks(databases);
      TestSql.exec(ds, create);
      TestSql.exec(ds, "INSERT INTO " + table.quoted() + " VALUES (1, 0)");
      try (Connection holder =
          TestSql.inTransaction(ds, "UPDATE " + table.quoted() + " SET n = 1 WHERE id = 1")) {
        CompletableFuture<Void> waiter =
            CompletableFuture.runAsync(
                () -> TestSql.exec(ds, "UPDATE " + table.quoted() + " SET n = 2 WHERE id = 1"));
        TestSql.awaitBlockedBy(ds, TestSql.pid(holder));

        assertThat(sample(databases.unpooledSource(DB), table))
            .containsEntry(
                "locks", new Health.Throttle("locks: 1 session(s) wait for locks on " + table));

        holder.rollback();
        waiter.get(30, TimeUnit.SECONDS);
      } finally {
        TestSql.exec(ds, "DROP TABLE " + table.quoted());
      }
    }
  }

  @Test
  void should_read_every_table_watched_with_one_statement_per_indicator() throws Exception {
    TableName waited = new TableName("public", TestSql.uniqueName("waited"));
    TableName quiet = new TableName("public", TestSql.uniqueName("quiet"));
    TableName missing = new TableName("public", TestSql.uniqueName("missing"));
    try (Databases databases = EmbeddedInfra.get().databases(DB)) {
      DataSource ds = checks(databases);
      AtomicInteger statements = new AtomicInteger();
      TestSql.exec(
          ds,
          "CREATE TABLE " + waited.quoted() + " (id bigint PRIMARY KEY, n int)",
          "CREATE TABLE " + quiet.quoted() + " (id bigint PRIMARY KEY)",
          "INSERT INTO " + waited.quoted() + " VALUES (1, 0)");
      try (HealthMonitor monitor =
              new HealthMonitor(
                  HealthMonitor.Settings.defaults(),
                  Map.of(DB, counting(databases.unpooledSource(DB), statements)),
                  Clock.systemUTC(),
                  new SimpleMeterRegistry());
          Connection holder =
              TestSql.inTransaction(ds, "UPDATE " + waited.quoted() + " SET n = 1 WHERE id = 1")) {
        monitor.addIndicators(
            DB,
            StandardIndicators.forDatabase(
                HealthThresholds.defaults(), null, Clock.systemUTC(), () -> Double.NaN));
        monitor.state(DB, quiet);
        monitor.runOnce(); // connects
        statements.set(0);
        monitor.runOnce();
        int oneTable = statements.get();

        monitor.state(DB, waited);
        monitor.state(DB, missing);
        CompletableFuture<Void> waiter =
            CompletableFuture.runAsync(
                () -> TestSql.exec(ds, "UPDATE " + waited.quoted() + " SET n = 2 WHERE id = 1"));
        TestSql.awaitBlockedBy(ds, TestSql.pid(holder));
        statements.set(0);
        monitor.runOnce();

        assertThat(statements.get()).as("as many as for one table").isEqualTo(oneTable);
        Map<String, Health> locks = new LinkedHashMap<>();
        monitor.readings().stream()
            .filter(r -> r.indicator().equals("locks") || r.indicator().equals("autovacuum"))
            .forEach(r -> locks.put(r.indicator() + " " + r.table().table(), r.health()));
        assertThat(locks)
            .containsEntry(
                "locks " + waited.table(),
                new Health.Throttle("locks: 1 session(s) wait for locks on " + waited))
            .containsEntry("locks " + quiet.table(), Health.NORMAL)
            .containsEntry("locks " + missing.table(), Health.NORMAL)
            .containsEntry("autovacuum " + waited.table(), Health.NORMAL)
            .containsEntry("autovacuum " + quiet.table(), Health.NORMAL)
            .containsEntry("autovacuum " + missing.table(), Health.NORMAL);

        holder.rollback();
        waiter.get(30, TimeUnit.SECONDS);
      } finally {
        TestSql.exec(ds, "DROP TABLE " + waited.quoted(), "DROP TABLE " + quiet.quoted());
      }
    }
  }

  /** The same source, counting the statements made on its connections. */
  private static DataSource counting(DataSource ds, AtomicInteger statements) {
    return (DataSource)
        Proxy.newProxyInstance(
            HealthMonitorIT.class.getClassLoader(),
            new Class<?>[] {DataSource.class},
            (proxy, method, args) -> {
              Object out = invoke(ds, method, args);
              if (!method.getName().equals("getConnection")) {
                return out;
              }
              Connection c = (Connection) out;
              return Proxy.newProxyInstance(
                  HealthMonitorIT.class.getClassLoader(),
                  new Class<?>[] {Connection.class},
                  (p, m, a) -> {
                    if (m.getName().equals("createStatement")
                        || m.getName().equals("prepareStatement")) {
                      statements.incrementAndGet();
                    }
                    return invoke(c, m, a);
                  });
            });
  }

  private static Object invoke(Object target, Method method, Object[] args) throws Throwable {
    try {
      return method.invoke(target, args);
    } catch (InvocationTargetException e) {
      throw e.getCause();
    }
  }

  @Test
  void should_let_the_server_end_a_sample_statement_that_waits() {
    try (Databases databases = EmbeddedInfra.get().databases(DB);
        HealthMonitor monitor =
            new HealthMonitor(
                HealthMonitor.Settings.defaults(),
                Map.of(DB, databases.unpooledSource(DB)),
                Clock.systemUTC(),
                new SimpleMeterRegistry())) {
      SessionSettings settings = new SessionSettings();
      monitor.addIndicators(DB, List.of(settings));
      monitor.runOnce();

      assertThat(settings.read).isEqualTo("5s 1s");
    }
  }

  @Test
  void should_read_locks_and_autovacuum_of_its_own_database_only() throws Exception {
    String original = TestSql.uniqueName("health_original");
    String copy = TestSql.uniqueName("health_copy");
    TableName table = new TableName("public", "vacuumed");
    try (Databases databases = EmbeddedInfra.get().databases(DB, original)) {
      DataSource admin = checks(databases);
      DataSource inOriginal = unpooled(databases.endpoint(original).url(), databases);
      try {
        TestSql.exec(
            inOriginal,
            "CREATE TABLE "
                + table.quoted()
                + " (id bigint PRIMARY KEY, pad text)"
                + SLOWEST_AUTOVACUUM);
        // A copy of the database (made of one no session is in): its table has the same oid.
        TestSql.exec(admin, "CREATE DATABASE " + copy + " TEMPLATE " + original);
        DataSource inCopy =
            unpooled(databases.endpoint(original).url().replace(original, copy), databases);
        String oid = "SELECT to_regclass('" + table.quoted() + "')::oid::bigint";
        assertThat(TestSql.count(inCopy, oid)).isEqualTo(TestSql.count(inOriginal, oid));

        // In the copy only: a transaction holding a lock on the table, and autovacuum on it.
        TestSql.exec(inCopy, deadRows(table));
        try (Connection old =
            TestSql.inTransaction(inCopy, "SELECT count(*) FROM " + table.quoted())) {
          awaitAutovacuumHolding(inCopy, table, Duration.ofSeconds(1));
          HealthThresholds anyAge = Thresholds.longTransaction(Duration.ofMillis(1));

          assertThat(sample(inCopy, table, anyAge))
              .as("the copy's own monitor sees both")
              .containsEntry(
                  "autovacuum", new Health.Throttle("autovacuum: autovacuum runs on " + table))
              .extractingByKey("locks")
              .satisfies(
                  h -> {
                    assertThat(h.label()).isEqualTo("STOP");
                    assertThat(h.reason())
                        .as("the threshold as configured, not 0 s")
                        .contains(" older than 1ms hold locks on " + table);
                  });
          assertThat(sample(inOriginal, table, anyAge))
              .containsEntry("autovacuum", Health.NORMAL)
              .containsEntry("locks", Health.NORMAL);
        }
      } finally {
        // Ends the copy's sessions, autovacuum's among them, to drop it.
        TestSql.exec(
            admin,
            "DROP DATABASE IF EXISTS " + copy + " WITH (FORCE)",
            "DROP DATABASE IF EXISTS " + original + " WITH (FORCE)");
      }
    }
  }

  @Test
  void should_stop_work_on_a_database_that_takes_no_writes() {
    String name = TestSql.uniqueName("health_read_only");
    Health stop =
        new Health.Stop(
            "read-only: default_transaction_read_only is on; the database takes no writes");
    try (Databases databases = EmbeddedInfra.get().databases(DB, name)) {
      DataSource admin = checks(databases);
      DataSource monitored = unpooled(databases.endpoint(name).url(), databases);
      try (HealthMonitor before = standard(name, monitored)) {
        assertThat(readOnly(before)).isEqualTo(Health.NORMAL);

        // For new sessions only: the monitor's, kept, is not one.
        TestSql.exec(admin, "ALTER DATABASE " + name + " SET default_transaction_read_only = on");
        assertThat(readOnly(before)).isEqualTo(stop);

        try (HealthMonitor during = standard(name, monitored)) {
          assertThat(readOnly(during)).isEqualTo(stop);

          // Maintenance over: the session opened during it keeps its value, the database has none.
          TestSql.exec(admin, "ALTER DATABASE " + name + " RESET default_transaction_read_only");
          assertThat(readOnly(during)).isEqualTo(Health.NORMAL);

          TestSql.exec(
              admin,
              "ALTER DATABASE " + name + " SET default_transaction_read_only = on",
              "ALTER ROLE CURRENT_USER IN DATABASE "
                  + name
                  + " SET default_transaction_read_only = off");
          assertThat(readOnly(during))
              .as("the role's own setting in the database comes before the database's")
              .isEqualTo(Health.NORMAL);
        }
      } finally {
        TestSql.exec(admin, "DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");
      }
    }
  }

  /** A monitor of the standard indicators on one database, sampled once. */
  private static HealthMonitor standard(String name, DataSource ds) {
    HealthMonitor monitor =
        new HealthMonitor(
            HealthMonitor.Settings.defaults(),
            Map.of(name, ds),
            Clock.systemUTC(),
            new SimpleMeterRegistry());
    monitor.addIndicators(
        name,
        StandardIndicators.forDatabase(
            HealthThresholds.defaults(), null, Clock.systemUTC(), () -> Double.NaN));
    monitor.runOnce();
    return monitor;
  }

  /** What the read-only indicator reads at the monitor's next sample. */
  private static Health readOnly(HealthMonitor monitor) {
    monitor.runOnce();
    return monitor.readings().stream()
        .filter(r -> r.indicator().equals("read-only"))
        .map(HealthMonitor.Reading::health)
        .findFirst()
        .orElseThrow();
  }

  /** A table's settings for autovacuum at its slowest, on any dead row: it holds its lock long. */
  private static final String SLOWEST_AUTOVACUUM =
      " WITH (autovacuum_vacuum_threshold = 0, autovacuum_vacuum_scale_factor = 0,"
          + " autovacuum_vacuum_cost_delay = 100, autovacuum_vacuum_cost_limit = 1)";

  /** 10,000 rows inserted, half of them deleted: dead rows for autovacuum to clean. */
  private static String[] deadRows(TableName table) {
    return new String[] {
      "INSERT INTO "
          + table.quoted()
          + " SELECT g, repeat('x', 200) FROM generate_series(1, 10000) g",
      "DELETE FROM " + table.quoted() + " WHERE id % 2 = 0"
    };
  }

  /**
   * Waits until an autovacuum worker vacuums the table and has held its lock on it longer than
   * {@code held}. The launcher visits each database once a minute by default: once a second while
   * this waits.
   */
  private static void awaitAutovacuumHolding(DataSource ds, TableName table, Duration held) {
    TestSql.withSystemSetting(
        ds,
        "autovacuum_naptime",
        "1",
        () -> {
          await()
              .atMost(Duration.ofSeconds(60))
              .until(
                  () ->
                      TestSql.count(
                              ds,
                              "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
                                  + " JOIN pg_stat_progress_vacuum v ON v.pid = a.pid"
                                  + " WHERE l.relation = to_regclass('"
                                  + table.quoted()
                                  + "') AND l.granted AND a.backend_type = 'autovacuum worker'"
                                  + " AND a.xact_start < now() - interval '"
                                  + held.toMillis()
                                  + " ms'")
                          == 1);
        });
  }

  /** What a monitor with the standard indicators reads on one table, by indicator. */
  private static Map<String, Health> sample(DataSource ds, TableName table) {
    return sample(ds, table, HealthThresholds.defaults());
  }

  /** The same with these thresholds. */
  private static Map<String, Health> sample(
      DataSource ds, TableName table, HealthThresholds thresholds) {
    try (HealthMonitor monitor =
        new HealthMonitor(
            HealthMonitor.Settings.defaults(),
            Map.of(DB, ds),
            Clock.systemUTC(),
            new SimpleMeterRegistry())) {
      monitor.addIndicators(
          DB,
          StandardIndicators.forDatabase(thresholds, null, Clock.systemUTC(), () -> Double.NaN));
      monitor.state(DB, table); // watched from now on
      monitor.runOnce();
      Map<String, Health> out = new LinkedHashMap<>();
      monitor.readings().forEach(r -> out.put(r.indicator(), r.health()));
      return out;
    }
  }

  /** The silent server first, as the order a configuration gives could put it. */
  private static Map<String, DataSource> databases(ServerSocket silent, Databases databases) {
    PGSimpleDataSource stalls = new PGSimpleDataSource();
    stalls.setURL("jdbc:postgresql://127.0.0.1:" + silent.getLocalPort() + "/silent");
    stalls.setUser("spillway");
    stalls.setConnectTimeout(8);
    stalls.setLoginTimeout(8);
    stalls.setSocketTimeout(10);
    Map<String, DataSource> all = new LinkedHashMap<>();
    all.put("silent", stalls);
    all.put(DB, databases.unpooledSource(DB));
    return all;
  }

  /** An indicator that reads through the monitor's connection, as every standard one does. */
  private static final class Reads implements HealthIndicator {
    @Override
    public String name() {
      return "reads";
    }

    @Override
    public Health sample(Connection connection, TableName table) throws SQLException {
      try (Statement s = connection.createStatement()) {
        s.executeQuery("SELECT 1").close();
      }
      return Health.NORMAL;
    }
  }

  /** An indicator that reads the monitor's session's time-outs through its connection. */
  private static final class SessionSettings implements HealthIndicator {
    volatile String read;

    @Override
    public String name() {
      return "session-settings";
    }

    @Override
    public Health sample(Connection connection, TableName table) throws SQLException {
      try (Statement s = connection.createStatement();
          java.sql.ResultSet rs =
              s.executeQuery(
                  "SELECT current_setting('statement_timeout') || ' '"
                      + " || current_setting('lock_timeout')")) {
        rs.next();
        read = rs.getString(1);
      }
      return Health.NORMAL;
    }
  }

  /** Connections to this URL, each opened and closed, as the pool's user. */
  private static DataSource unpooled(String url, Databases databases) {
    PGSimpleDataSource ds = new PGSimpleDataSource();
    ds.setURL(url);
    ds.setUser(databases.endpoint(DB).username());
    return ds;
  }

  /** Connections of the test's own, told apart from the monitor's by their application name. */
  private static DataSource checks(Databases databases) {
    PGSimpleDataSource ds = new PGSimpleDataSource();
    ds.setURL(databases.endpoint(DB).url());
    ds.setUser(databases.endpoint(DB).username());
    ds.setApplicationName("checks");
    return ds;
  }

  /** The pid of the monitor's connection, the one session of Spillway's in the database. */
  private static long monitorBackend(DataSource ds) {
    return TestSql.count(
        ds,
        "SELECT pid FROM pg_stat_activity WHERE datname = '"
            + DB
            + "' AND application_name = 'spillway'");
  }
}
