package dev.spillway.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.spillway.buffers.BufferPipeline;
import dev.spillway.config.ConfigLoader;
import dev.spillway.config.SpillwayConfig;
import dev.spillway.jdbc.DatabaseEndpoint;
import dev.spillway.lfk.LfkConfig;
import dev.spillway.runtime.SpillwayRuntime;
import dev.spillway.testing.BulkReceiver;
import dev.spillway.testing.Cli;
import dev.spillway.testing.EmbeddedInfra;
import dev.spillway.testing.TestSql;
import dev.spillway.testing.TopicReader;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.EnumSet;
import java.util.Set;
import java.util.UUID;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** {@code run}'s start-up on the shared embedded PostgreSQL and Kafka. */
class RunCommandIT {
  private static final Duration TIMEOUT = Duration.ofSeconds(90);

  @Test
  void should_capture_a_buffer_left_out_by_only_and_handle_its_rows_once_it_runs(@TempDir Path dir)
      throws Exception {
    EmbeddedInfra infra = EmbeddedInfra.get();
    String id = UUID.randomUUID().toString().replace("-", "").substring(0, 8);
    String prefix = "r" + id;
    String schema = "s" + id;
    try (BulkReceiver receiver = new BulkReceiver()) {
      String yaml = config(infra, prefix, schema, receiver.url().toString());
      SpillwayConfig config = ConfigLoader.parse(yaml, "test.yml", dir, name -> null);
      LfkConfig lfk = LfkConfig.from(config);
      BufferPipeline buffers = BufferPipeline.fromConfig(config);
      PrintWriter out = new PrintWriter(new StringWriter());

      try (SpillwayRuntime runtime = SpillwayRuntime.start(config, Set.of(), Clock.systemUTC())) {
        DataSource ds = runtime.databases().dataSource("main");
        TestSql.exec(
            ds,
            "CREATE SCHEMA " + schema,
            "CREATE TABLE "
                + schema
                + ".contact_activity_events (id bigint PRIMARY KEY, activity text NOT NULL)");
        runtime.startCapture(
            RunCommand.start(runtime, EnumSet.of(RunCommand.Only.lfk), lfk, buffers, out));
        TestSql.exec(
            ds,
            "INSERT INTO " + schema + ".contact_activity_events VALUES (1, 'call')",
            "INSERT INTO " + schema + ".contact_activity_events VALUES (2, 'mail')");

        // Left out of --only, the buffer is not worked on, but its inserts are captured.
        TopicReader.readAtLeast(
            infra.bootstrapServers(), runtime.topics().bufferEvents("activity"), 2, TIMEOUT);
        assertThat(receiver.calls()).isEmpty();
      }

      try (SpillwayRuntime runtime = SpillwayRuntime.start(config, Set.of(), Clock.systemUTC())) {
        DataSource ds = runtime.databases().dataSource("main");
        runtime.startCapture(
            RunCommand.start(runtime, EnumSet.allOf(RunCommand.Only.class), lfk, buffers, out));
        await()
            .atMost(TIMEOUT)
            .until(
                () ->
                    TestSql.count(ds, "SELECT count(*) FROM " + schema + ".contact_activity_events")
                        == 0);
        assertThat(receiver.rows()).isEqualTo(2);
      }
    } finally {
      try (var databases = infra.databases("pipeline")) {
        TestSql.dropCapture(databases.dataSource("pipeline"), prefix + "_main");
        TestSql.exec(
            databases.dataSource("pipeline"), "DROP SCHEMA IF EXISTS " + schema + " CASCADE");
      }
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
            db.url(),
            db.username());
    SpillwayConfig config = ConfigLoader.parse(yaml, "test.yml", dir, name -> null);
    StringWriter said = new StringWriter();
    try (SpillwayRuntime runtime = SpillwayRuntime.start(config, Set.of(), Clock.systemUTC())) {
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
    EmbeddedInfra infra = EmbeddedInfra.get();
    String id = UUID.randomUUID().toString().replace("-", "").substring(0, 8);
    String prefix = "r" + id;
    String schema = "s" + id;
    String slot = prefix + "_main";
    String yaml = config(infra, prefix, schema, "http://127.0.0.1:9/");
    Path file = dir.resolve("spillway.yml");
    Files.writeString(file, yaml);
    try (var databases = infra.databases("pipeline")) {
      DataSource ds = databases.dataSource("pipeline");
      TestSql.exec(
          ds,
          "CREATE SCHEMA " + schema,
          "CREATE TABLE " + schema + ".contact_activity_events (id bigint PRIMARY KEY)");
      try {
        // Two instances of one installation: the same configuration, a working directory each.
        SpillwayRuntime first = instance(yaml, file, dir.resolve("first"));
        try (SpillwayRuntime second = instance(yaml, file, dir.resolve("second"))) {
          assertThat(first.status().databases().get(0).captureStandingBySince()).isNull();
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

        TestSql.invalidateSlot(ds, slot);
        Cli.Result invalidated = Cli.run("run", "-c", file.toString());
        assertThat(invalidated.exitCode()).as(invalidated.err()).isEqualTo(1);
        assertThat(invalidated.err())
            .startsWith(
                "Replication slot "
                    + slot
                    + " of database main was invalidated by the server (wal_removed: it held more"
                    + " WAL than max_slot_wal_keep_size allows)");
      } finally {
        TestSql.dropCapture(ds, slot);
        TestSql.exec(ds, "DROP SCHEMA IF EXISTS " + schema + " CASCADE");
      }
    }
  }

  /** What {@code run} starts, on a working directory of its own. */
  private static SpillwayRuntime instance(String yaml, Path file, Path workingDir)
      throws Exception {
    return started(
        ConfigLoader.parse(yaml, file.toString(), workingDir, name -> null),
        EnumSet.allOf(RunCommand.Only.class));
  }

  /** What {@code run --only} starts: the runtime, the pipelines named, capture of them all. */
  static SpillwayRuntime started(SpillwayConfig config, Set<RunCommand.Only> only)
      throws Exception {
    SpillwayRuntime runtime = SpillwayRuntime.start(config, Set.of(), Clock.systemUTC());
    try {
      runtime.startCapture(
          RunCommand.start(
              runtime,
              only,
              LfkConfig.from(config),
              BufferPipeline.fromConfig(config),
              new PrintWriter(new StringWriter())));
      return runtime;
    } catch (Exception e) {
      runtime.close();
      throw e;
    }
  }

  /** A buffer on the shared embedded parts, its handler posting to {@code url}. */
  static String config(EmbeddedInfra infra, String prefix, String schema, String url) {
    DatabaseEndpoint db = infra.database("pipeline");
    return String.format(
        """
        http: { port: 0 }
        kafka: { bootstrap-servers: "%s", topic-prefix: %s, partitions: 1 }
        databases:
          main: { url: "%s", username: %s }
        buffers:
          activity:
            table: %s.contact_activity_events
            max-wait: 200ms
            handler:
              http: { url: "%s" }
        """,
        infra.bootstrapServers(), prefix, db.url(), db.username(), schema, url);
  }
}
