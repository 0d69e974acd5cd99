package dev.spillway.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.spillway.config.SpillwayConfig;
import dev.spillway.jdbc.DatabaseEndpoint;
import dev.spillway.runtime.SpillwayRuntime;
import dev.spillway.testing.BulkReceiver;
import dev.spillway.testing.Cli;
import dev.spillway.testing.TestSql;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.EnumSet;
import java.util.Map;
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
    try (BulkReceiver receiver = new BulkReceiver();
        BufferInstallation installation = new BufferInstallation(dir, receiver.url().toString())) {
      SpillwayConfig config = installation.config(null);
      String file = installation.file.toString();
      String waiting = "SELECT count(*) FROM " + installation.table();

      // The buffer left out: its two inserts are captured, then Kafka lets them go.
      forget(
          installation.infra.bootstrapServers(),
          installation.twoRowsCapturedWithTheBufferLeftOut(config, receiver));

      try (SpillwayRuntime runtime =
          BufferInstallation.started(config, EnumSet.allOf(RunCommand.Only.class))) {
        DataSource ds = runtime.databases().dataSource("main");
        await()
            .during(Duration.ofSeconds(3))
            .atMost(Duration.ofSeconds(10))
            .until(() -> TestSql.count(ds, waiting) == 2 && receiver.calls().isEmpty());

        // Named twice, read once: each row handed over once.
        Cli.Result reread = Cli.run("buffers", "reread", "activity", "activity", "-c", file);

        assertThat(reread.exitCode()).as(reread.err()).isZero();
        assertThat(reread.out())
            .isEqualTo(
                "Buffer activity: capture of database main reads the 2 rows now in "
                    + installation.table()
                    + " again; each is handled as it comes, once.\n");
        await().atMost(TIMEOUT).until(() -> TestSql.count(ds, waiting) == 0);
        assertThat(receiver.rows()).isEqualTo(2);
      }

      Cli.Result unknown = Cli.run("buffers", "reread", "nope", "-c", file);
      assertThat(unknown.exitCode()).isEqualTo(2);
      assertThat(unknown.err())
          .startsWith("nope is not a buffer of the configuration (buffers: activity)");

      // A table renamed before its buffer's configuration: nothing to wait for.
      try (var databases = installation.infra.databases("pipeline")) {
        TestSql.exec(
            databases.dataSource("pipeline"),
            "ALTER TABLE " + installation.table() + " RENAME TO renamed");
      }
      Cli.Result gone = Cli.run("buffers", "reread", "activity", "-c", file);
      assertThat(gone.exitCode()).as(gone.out() + gone.err()).isEqualTo(2);
      assertThat(gone.out()).isEmpty();
      assertThat(gone.err())
          .startsWith(installation.file + ":")
          .contains(
              "buffers.activity names table "
                  + installation.table()
                  + ", which does not exist in database main.");
    }
  }

  @Test
  void should_ask_nothing_of_a_database_answering_from_a_standby(@TempDir Path dir)
      throws Exception {
    try (BulkReceiver receiver = new BulkReceiver();
        BufferInstallation installation = new BufferInstallation(dir, receiver.url().toString())) {
      // No standby here: the installation's schema, searched before pg_catalog, has
      // pg_is_in_recovery() say true, as a standby's does (dropped with the schema), for database
      // replica, whose buffer mirror comes after activity on main. Neither buffer ever ran, so its
      // table is not published yet.
      try (var databases = installation.infra.databases("pipeline")) {
        TestSql.exec(
            databases.dataSource("pipeline"),
            "CREATE FUNCTION "
                + installation.schema
                + ".pg_is_in_recovery() RETURNS boolean LANGUAGE sql AS 'SELECT true'");
      }
      DatabaseEndpoint db = installation.infra.database("pipeline");
      String replica =
          db.url()
              + (db.url().contains("?") ? "&" : "?")
              + "currentSchema="
              + installation.schema
              + ",pg_catalog";
      Files.writeString(
          installation.file,
          Files.readString(installation.file)
              .replace(
                  "buffers:\n",
                  String.format(
                      """
                        replica: { url: "%s", username: %s }
                      buffers:
                        mirror:
                          table: %s
                          database: replica
                          handler:
                            http: { url: "%s" }
                      """,
                      replica, db.username(), installation.table(), receiver.url())));

      refusedAskingNothing(
          installation,
          "mirror",
          "Database replica answered from a standby (in recovery); capture needs the primary");
    }
  }

  @Test
  void should_ask_nothing_when_a_buffer_s_table_cannot_be_read_again(@TempDir Path dir)
      throws Exception {
    try (BulkReceiver receiver = new BulkReceiver();
        BufferInstallation installation = new BufferInstallation(dir, receiver.url().toString())) {
      String quoted = installation.schema + ".it's";
      try (var databases = installation.infra.databases("pipeline")) {
        TestSql.exec(
            databases.dataSource("pipeline"),
            "CREATE TABLE " + installation.schema + ".\"it's\" (id bigint PRIMARY KEY)");
      }
      Files.writeString(
          installation.file,
          Files.readString(installation.file)
              .replace(
                  "buffers:\n",
                  String.format(
                      """
                      buffers:
                        quoted:
                          table: "%s"
                          handler:
                            http: { url: "%s" }
                      """,
                      quoted, receiver.url())));

      refusedAskingNothing(
          installation,
          "quoted",
          "Buffer quoted: Debezium cannot be asked to read "
              + quoted
              + ", whose name has a dot, a space or a quote; nothing was asked");
    }
  }

  /**
   * {@code buffers reread activity OTHER} refused, exit 2, with {@code why}: activity comes first,
   * so nothing of it may be asked before OTHER is refused.
   */
  private static void refusedAskingNothing(
      BufferInstallation installation, String other, String why) {
    Cli.Result reread =
        Cli.run("buffers", "reread", "activity", other, "-c", installation.file.toString());
    assertThat(reread.exitCode()).as(reread.out() + reread.err()).isEqualTo(2);
    assertThat(reread.err()).contains(why);
    assertThat(reread.out()).as("nothing asked, nothing said done").isEmpty();
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
