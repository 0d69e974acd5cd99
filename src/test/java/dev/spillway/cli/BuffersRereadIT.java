package dev.spillway.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.spillway.config.ConfigLoader;
import dev.spillway.config.SpillwayConfig;
import dev.spillway.runtime.SpillwayRuntime;
import dev.spillway.testing.BulkReceiver;
import dev.spillway.testing.Cli;
import dev.spillway.testing.EmbeddedInfra;
import dev.spillway.testing.TestSql;
import dev.spillway.testing.TopicReader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.EnumSet;
import java.util.Map;
import java.util.UUID;
import javax.sql.DataSource;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code buffers reread} on the shared embedded PostgreSQL and Kafka. */
class BuffersRereadIT {
  private static final Duration TIMEOUT = Duration.ofSeconds(90);

  @Test
  void should_hand_over_rows_whose_captured_inserts_kafka_no_longer_holds(@TempDir Path dir)
      throws Exception {
    EmbeddedInfra infra = EmbeddedInfra.get();
    String id = UUID.randomUUID().toString().replace("-", "").substring(0, 8);
    String prefix = "r" + id;
    String schema = "s" + id;
    try (BulkReceiver receiver = new BulkReceiver()) {
      Path file = dir.resolve("spillway.yml");
      Files.writeString(
          file, RunCommandIT.config(infra, prefix, schema, receiver.url().toString()));
      SpillwayConfig config = ConfigLoader.load(file, name -> null);
      try (var databases = infra.databases("pipeline")) {
        TestSql.exec(
            databases.dataSource("pipeline"),
            "CREATE SCHEMA " + schema,
            "CREATE TABLE "
                + schema
                + ".contact_activity_events (id bigint PRIMARY KEY, activity text NOT NULL)");
      }
      try {
        // The buffer left out: its two inserts are captured, then Kafka lets them go.
        try (SpillwayRuntime runtime =
            RunCommandIT.started(config, EnumSet.of(RunCommand.Only.lfk))) {
          DataSource ds = runtime.databases().dataSource("main");
          TestSql.exec(
              ds,
              "INSERT INTO " + schema + ".contact_activity_events VALUES (1, 'call')",
              "INSERT INTO " + schema + ".contact_activity_events VALUES (2, 'mail')");
          String events = runtime.topics().bufferEvents("activity");
          TopicReader.readAtLeast(infra.bootstrapServers(), events, 2, TIMEOUT);
          forget(infra.bootstrapServers(), events);
        }

        try (SpillwayRuntime runtime =
            RunCommandIT.started(config, EnumSet.allOf(RunCommand.Only.class))) {
          DataSource ds = runtime.databases().dataSource("main");
          String waiting = "SELECT count(*) FROM " + schema + ".contact_activity_events";
          await()
              .during(Duration.ofSeconds(3))
              .atMost(Duration.ofSeconds(10))
              .until(() -> TestSql.count(ds, waiting) == 2 && receiver.calls().isEmpty());

          Cli.Result reread = Cli.run("buffers", "reread", "activity", "-c", file.toString());

          assertThat(reread.exitCode()).as(reread.err()).isZero();
          assertThat(reread.out())
              .isEqualTo(
                  "Buffer activity: capture of database main reads the 2 rows now in "
                      + schema
                      + ".contact_activity_events again; each is handled as it comes, once.\n");
          await().atMost(TIMEOUT).until(() -> TestSql.count(ds, waiting) == 0);
          assertThat(receiver.rows()).isEqualTo(2);
        }

        Cli.Result unknown = Cli.run("buffers", "reread", "nope", "-c", file.toString());
        assertThat(unknown.exitCode()).isEqualTo(2);
        assertThat(unknown.err())
            .startsWith("nope is not a buffer of the configuration (buffers: activity)");
      } finally {
        try (var databases = infra.databases("pipeline")) {
          TestSql.dropCapture(databases.dataSource("pipeline"), prefix + "_main");
          TestSql.exec(
              databases.dataSource("pipeline"), "DROP SCHEMA IF EXISTS " + schema + " CASCADE");
        }
      }
    }
  }

  /** Deletes every record of the topic's one partition, as retention does. */
  private static void forget(String bootstrapServers, String topic) throws Exception {
    TopicPartition p = new TopicPartition(topic, 0);
    try (Admin admin =
        Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers))) {
      long end =
          admin.listOffsets(Map.of(p, OffsetSpec.latest())).partitionResult(p).get().offset();
      admin.deleteRecords(Map.of(p, RecordsToDelete.beforeOffset(end))).all().get();
    }
  }
}
