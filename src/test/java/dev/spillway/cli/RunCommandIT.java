package dev.spillway.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.spillway.buffers.BufferPipeline;
import dev.spillway.config.ConfigException;
import dev.spillway.config.ConfigLoader;
import dev.spillway.config.SpillwayConfig;
import dev.spillway.event.TopicProvisioner;
import dev.spillway.event.Topics;
import dev.spillway.jdbc.DatabaseEndpoint;
import dev.spillway.lfk.LfkConfig;
import dev.spillway.ops.StatusReport;
import dev.spillway.ops.StatusText;
import dev.spillway.runtime.SpillwayRuntime;
import dev.spillway.testing.BulkReceiver;
import dev.spillway.testing.Cli;
import dev.spillway.testing.EmbeddedInfra;
import dev.spillway.testing.TestSql;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Path;
import java.sql.Connection;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** {@code run}'s start-up on the shared embedded PostgreSQL and Kafka. */
class RunCommandIT {
  private static final Duration TIMEOUT = Duration.ofSeconds(90);

  @Test
  void should_wait_for_a_capture_still_starting_when_stopped_and_stop_it_as_one_started(
      @TempDir Path dir) throws Exception {
    try (BulkReceiver receiver = new BulkReceiver();
        BufferInstallation installation = new BufferInstallation(dir, receiver.url().toString());
        var databases = installation.infra.databases("pipeline")) {
      SpillwayConfig config = installation.config(null);
      String slot = installation.prefix + "_main";
      DataSource ds = databases.dataSource("pipeline");
      // A transaction with an id: making the slot waits for it, so capture is still starting
      // when the stop comes, as a SIGTERM during start-up does.
      try (Connection writer =
          TestSql.inTransaction(
              ds, "INSERT INTO " + installation.table() + " VALUES (9, 'open')")) {
        SpillwayRuntime runtime = SpillwayRuntime.start(config, Set.of(), Clock.systemUTC());
        List<dev.spillway.capture.CaptureRoute> routes =
            started(runtime, EnumSet.allOf(RunCommand.Only.class), config);
        CompletableFuture<Void> starting =
            CompletableFuture.runAsync(
                () -> {
                  try {
                    runtime.startCapture(routes);
                  } catch (InterruptedException e) {
                    throw new CompletionException(e);
                  }
                });
        await()
            .atMost(TIMEOUT)
            .alias("capture making its slot, waiting for the open transaction")
            .until(
                () ->
                    TestSql.sessions(
                            ds,
                            "SELECT pg_create_logical_replication_slot",
                            "wait_event_type = 'Lock'")
                        == 1);
        assertThat(StatusText.render(runtime.status(), Instant.now()))
            .as("status while capture sets up")
            .contains("Capture   starting: its slots and publications are being set up")
            .doesNotContain("nothing configured");
        CompletableFuture<Void> closing = CompletableFuture.runAsync(runtime::close);
        await()
            .during(Duration.ofSeconds(2))
            .atMost(Duration.ofSeconds(5))
            .alias("the stop waiting for capture's start")
            .until(() -> !closing.isDone());

        writer.commit();
        closing.get(TIMEOUT.toSeconds(), TimeUnit.SECONDS);
        starting.get(TIMEOUT.toSeconds(), TimeUnit.SECONDS);
      }
      assertThat(
              TestSql.count(
                  ds, "SELECT count(*) FROM spillway.capture_release WHERE slot = '" + slot + "'"))
          .as("stopped as a started capture is: its slot let go for another instance")
          .isOne();
    }
  }

  @Test
  void should_capture_a_buffer_left_out_by_only_and_handle_its_rows_once_it_runs(@TempDir Path dir)
      throws Exception {
    try (BulkReceiver receiver = new BulkReceiver();
        BufferInstallation installation = new BufferInstallation(dir, receiver.url().toString())) {
      SpillwayConfig config = installation.config(null);
      String waiting = "SELECT count(*) FROM " + installation.table();

      // Left out of --only, the buffer is not worked on, but its inserts are captured.
      installation.twoRowsCapturedWithTheBufferLeftOut(config, receiver);

      try (SpillwayRuntime runtime =
          BufferInstallation.started(config, EnumSet.allOf(RunCommand.Only.class))) {
        DataSource ds = runtime.databases().dataSource("main");
        await().atMost(TIMEOUT).until(() -> TestSql.count(ds, waiting) == 0);
        assertThat(receiver.rows()).isEqualTo(2);
        assertThat(runtime.status().captureStarting()).as("once capture streams").isFalse();
      }
    }
  }

  @Test
  void should_check_the_buffers_before_starting_the_loose_foreign_keys(@TempDir Path dir)
      throws Exception {
    EmbeddedInfra infra = EmbeddedInfra.get();
    DatabaseEndpoint db = infra.database("pipeline");
    String prefix = "c" + UUID.randomUUID().toString().replace("-", "").substring(0, 8);
    try (var dbs = infra.databases("pipeline")) {
      TestSql.exec(
          dbs.dataSource("pipeline"),
          "CREATE TABLE IF NOT EXISTS run_parents (id bigint PRIMARY KEY)",
          "CREATE TABLE IF NOT EXISTS run_children (id bigint PRIMARY KEY, parent_id bigint)",
          "CREATE INDEX IF NOT EXISTS run_children_parent ON run_children (parent_id)");
    }
    String yaml =
        String.format(
            """
            http: { port: 0 }
            kafka: { bootstrap-servers: "%s", topic-prefix: %s }
            databases:
              main: { url: "%s", username: %s }
            loose-foreign-keys:
              definitions:
                run_children:
                  - table: run_parents
                    column: parent_id
                    on_delete: async_delete
            buffers:
              events:
                table: run_no_such_events
                handler: { http: { url: "http://127.0.0.1:9/" } }
            """,
            infra.bootstrapServers(), prefix, db.url(), db.username());
    SpillwayConfig config = ConfigLoader.parse(yaml, "test.yml", dir, name -> null);
    // Held back by --only lfk too: its inserts would be captured, which capture would refuse.
    for (Set<RunCommand.Only> only :
        List.of(EnumSet.allOf(RunCommand.Only.class), EnumSet.of(RunCommand.Only.lfk))) {
      try (SpillwayRuntime runtime = SpillwayRuntime.start(config, Set.of(), Clock.systemUTC())) {
        assertThatThrownBy(() -> started(runtime, only, config))
            .as("--only %s", only)
            .isInstanceOf(ConfigException.class)
            .hasMessageStartingWith(
                "test.yml:13: buffers.events names table run_no_such_events, which does not"
                    + " exist");
      }
    }
    assertThat(
            TopicProvisioner.exists(
                infra.bootstrapServers(), Map.of(), new Topics(prefix).cleanupBatches()))
        .as("the loose-foreign-key pipeline not started")
        .isFalse();

    // What only the buffers' run needs (an archive table, here) does not hold --only lfk back.
    try (var dbs = infra.databases("pipeline")) {
      TestSql.exec(
          dbs.dataSource("pipeline"),
          "CREATE TABLE IF NOT EXISTS run_events (id bigint PRIMARY KEY, v text)");
    }
    SpillwayConfig mending =
        ConfigLoader.parse(
            yaml.replace("topic-prefix: " + prefix, "topic-prefix: " + prefix + "m")
                .replace(
                    "table: run_no_such_events",
                    "table: run_events\n    archive-table: run_no_such_archive"),
            "test.yml",
            dir,
            name -> null);
    try (SpillwayRuntime runtime = SpillwayRuntime.start(mending, Set.of(), Clock.systemUTC())) {
      assertThatThrownBy(() -> started(runtime, EnumSet.allOf(RunCommand.Only.class), mending))
          .isInstanceOf(ConfigException.class)
          .hasMessageContaining("run_no_such_archive");
      assertThat(started(runtime, EnumSet.of(RunCommand.Only.lfk), mending))
          .as("capture routes of both pipelines")
          .hasSize(2);
    }
  }

  @Test
  void should_say_when_no_pipeline_is_configured(@TempDir Path dir) throws Exception {
    EmbeddedInfra infra = EmbeddedInfra.get();
    DatabaseEndpoint db = infra.database("pipeline");
    String yaml =
        String.format(
            """
            http: { port: 0 }
            kafka: { bootstrap-servers: "%s", topic-prefix: r%s }
            databases:
              main: { url: "%s", username: %s }
            loose-foreign-keys: { batch-size: 10 }
            """,
            infra.bootstrapServers(),
            UUID.randomUUID().toString().replace("-", "").substring(0, 8),
            // A password in the URL (here one pgjdbc uses only for an SSL key) is never shown.
            db.url() + (db.url().contains("?") ? "&" : "?") + "sslpassword=s3cret",
            db.username());
    SpillwayConfig config = ConfigLoader.parse(yaml, "test.yml", dir, name -> null);
    StringWriter said = new StringWriter();
    try (SpillwayRuntime runtime = SpillwayRuntime.start(config, Set.of(), Clock.systemUTC())) {
      java.time.Instant before = java.time.Instant.now();
      StatusReport report = runtime.status();
      assertThat(report.databases().get(0).url())
          .endsWith("sslpassword=****")
          .doesNotContain("s3cret");
      assertThat(java.time.Instant.parse(report.madeAt()))
          .isBetween(before, java.time.Instant.now());
      assertThat(
              RunCommand.start(
                  runtime,
                  EnumSet.allOf(RunCommand.Only.class),
                  LfkConfig.from(config),
                  BufferPipeline.fromConfig(config),
                  new PrintWriter(said)))
          .isEmpty();
    }
    assertThat(said.toString())
        .startsWith("No pipeline is configured: Spillway runs with nothing to do.")
        .containsOnlyOnce("No pipeline");
  }

  @Test
  @Timeout(300)
  void should_stand_by_for_another_instance_and_exit_1_naming_an_invalidated_slot(@TempDir Path dir)
      throws Exception {
    try (BufferInstallation installation = new BufferInstallation(dir, "http://127.0.0.1:9/")) {
      String slot = installation.prefix + "_main";
      // Two instances of one installation: the same configuration, a working directory each.
      SpillwayRuntime first =
          BufferInstallation.started(
              installation.config(dir.resolve("first")), EnumSet.allOf(RunCommand.Only.class));
      try (SpillwayRuntime second =
          BufferInstallation.started(
              installation.config(dir.resolve("second")), EnumSet.allOf(RunCommand.Only.class))) {
        assertThat(first.status().databases().get(0).captureStandingBySince()).isNull();
        // Another logical slot of the database, as another tool's would be.
        String other = installation.prefix + "_other";
        try (var databases = installation.infra.databases("pipeline")) {
          DataSource ds = databases.dataSource("pipeline");
          TestSql.count(
              ds,
              "SELECT count(*) FROM pg_create_logical_replication_slot('"
                  + other
                  + "', 'pgoutput')");
          try {
            List<StatusReport.SlotStatus> slots = first.status().databases().get(0).slots();
            assertThat(slots)
                .as("its own slot told from any other of the database")
                .filteredOn(StatusReport.SlotStatus::ours)
                .extracting(StatusReport.SlotStatus::slot)
                .containsExactly(slot);
            assertThat(slots).extracting(StatusReport.SlotStatus::slot).contains(other);
          } finally {
            TestSql.count(ds, "SELECT count(*) FROM pg_drop_replication_slot('" + other + "')");
          }
        }
        assertThat(second.status().databases().get(0).captureStandingBySince())
            .as("the second stands by while the first streams")
            .isNotNull();

        first.close();

        await()
            .atMost(TIMEOUT)
            .untilAsserted(
                () ->
                    assertThat(second.status().databases().get(0).captureStandingBySince())
                        .as("taken over")
                        .isNull());
        assertThat(second.failure()).isEmpty();
      } finally {
        first.close();
      }

      try (var databases = installation.infra.databases("pipeline")) {
        TestSql.invalidateSlot(databases.dataSource("pipeline"), slot);
      }
      Cli.Result invalidated = Cli.run("run", "-c", installation.file.toString());
      assertThat(invalidated.exitCode()).as(invalidated.err()).isEqualTo(1);
      assertThat(invalidated.err())
          .startsWith(
              "Replication slot "
                  + slot
                  + " of database main was invalidated by the server (wal_removed: it held more"
                  + " WAL than max_slot_wal_keep_size allows)");
    }
  }

  /** What {@code run --only} starts on {@code runtime}, its words to the user dropped. */
  private static List<dev.spillway.capture.CaptureRoute> started(
      SpillwayRuntime runtime, Set<RunCommand.Only> only, SpillwayConfig config) throws Exception {
    return RunCommand.start(
        runtime,
        only,
        LfkConfig.from(config),
        BufferPipeline.fromConfig(config),
        new PrintWriter(new StringWriter()));
  }
}
