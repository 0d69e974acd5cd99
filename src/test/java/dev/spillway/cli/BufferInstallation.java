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
import dev.spillway.testing.EmbeddedInfra;
import dev.spillway.testing.TestSql;
import dev.spillway.testing.TopicReader;
import java.io.IOException;
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

/**
 * An installation of its own on the shared embedded PostgreSQL and Kafka: a topic prefix, a schema
 * holding buffer table {@code contact_activity_events}, and a configuration file with buffer {@code
 * activity} on it; closing drops its slot, publication and schema.
 */
final class BufferInstallation implements AutoCloseable {
  final EmbeddedInfra infra = EmbeddedInfra.get();
  final String prefix;
  final String schema;
  final Path file;

  /**
   * @param url where the buffer's HTTP handler posts
   */
  BufferInstallation(Path dir, String url) throws IOException {
    String id = UUID.randomUUID().toString().replace("-", "").substring(0, 8);
    prefix = "r" + id;
    schema = "s" + id;
    file = dir.resolve("spillway.yml");
    DatabaseEndpoint db = infra.database("pipeline");
    Files.writeString(
        file,
        String.format(
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
            infra.bootstrapServers(), prefix, db.url(), db.username(), schema, url));
    try (var databases = infra.databases("pipeline")) {
      TestSql.exec(
          databases.dataSource("pipeline"),
          "CREATE SCHEMA " + schema,
          "CREATE TABLE "
              + schema
              + ".contact_activity_events (id bigint PRIMARY KEY, activity text NOT NULL)");
    }
  }

  /** The configuration, its working directory beside the file unless {@code workingDir} is set. */
  SpillwayConfig config(Path workingDir) throws IOException {
    return workingDir == null
        ? ConfigLoader.load(file, name -> null)
        : ConfigLoader.parse(Files.readString(file), file.toString(), workingDir, name -> null);
  }

  String table() {
    return schema + ".contact_activity_events";
  }

  /**
   * Runs with the buffer left out ({@code --only lfk}), inserts two rows into its table and returns
   * once both inserts are captured in Kafka, acknowledged, and {@code receiver} has had no call for
   * 3 s after.
   *
   * @return the buffer's events topic
   */
  String twoRowsCapturedWithTheBufferLeftOut(SpillwayConfig config, BulkReceiver receiver)
      throws Exception {
    StringWriter said = new StringWriter();
    try (SpillwayRuntime runtime =
        started(config, EnumSet.of(RunCommand.Only.lfk), new PrintWriter(said))) {
      assertThat(said.toString().strip())
          .isEqualTo(RunCommand.onlyUnconfigured(EnumSet.of(RunCommand.Only.lfk)))
          .startsWith("--only names lfk, which the configuration does not set up: ");
      TestSql.exec(
          runtime.databases().dataSource("main"),
          "INSERT INTO " + table() + " VALUES (1, 'call')",
          "INSERT INTO " + table() + " VALUES (2, 'mail')");
      String events = runtime.topics().bufferEvents("activity");
      TopicReader.readAtLeast(infra.bootstrapServers(), events, 2, Duration.ofSeconds(90));
      // A change after them, as Debezium's heartbeat writes it, so capture acknowledges them: the
      // last insert before a stop is published again at the next start otherwise.
      TestSql.exec(
          runtime.databases().dataSource("main"),
          "WITH old AS (DELETE FROM spillway.capture_heartbeat)"
              + " INSERT INTO spillway.capture_heartbeat (beat_at) VALUES (now())");
      await()
          .during(Duration.ofSeconds(3))
          .atMost(Duration.ofSeconds(5))
          .until(() -> receiver.calls().isEmpty());
      return events;
    }
  }

  /** What {@code run --only} starts: the runtime, the pipelines named, capture of them all. */
  static SpillwayRuntime started(SpillwayConfig config, Set<RunCommand.Only> only)
      throws Exception {
    return started(config, only, new PrintWriter(new StringWriter()));
  }

  private static SpillwayRuntime started(
      SpillwayConfig config, Set<RunCommand.Only> only, PrintWriter out) throws Exception {
    SpillwayRuntime runtime = SpillwayRuntime.start(config, Set.of(), Clock.systemUTC());
    try {
      runtime.startCapture(
          RunCommand.start(
              runtime, only, LfkConfig.from(config), BufferPipeline.fromConfig(config), out));
      return runtime;
    } catch (Exception e) {
      runtime.close();
      throw e;
    }
  }

  @Override
  public void close() {
    try (var databases = infra.databases("pipeline")) {
      DataSource ds = databases.dataSource("pipeline");
      TestSql.dropCapture(ds, prefix + "_main");
      TestSql.exec(ds, "DROP SCHEMA IF EXISTS " + schema + " CASCADE");
    }
  }
}
