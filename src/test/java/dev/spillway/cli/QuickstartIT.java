package dev.spillway.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import dev.spillway.runtime.EmbeddedPostgresServer;
import dev.spillway.testing.Cli;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.slf4j.LoggerFactory;

/** The quickstart as a new user runs it: its own embedded PostgreSQL and Kafka. */
class QuickstartIT {

  @Test
  void should_keep_out_of_a_working_directory_where_run_kept_its_embedded_servers(@TempDir Path dir)
      throws Exception {
    Path config = dir.resolve("spillway.yml");
    Files.writeString(
        config,
        """
        working-dir: wd
        http:
          port: 0
        buffers:
          events:
            table: events
            handler:
              http: { url: "http://127.0.0.1:9/bulk" }
        """);
    Path mark = dir.resolve("wd/run-embedded");

    Cli.Result refused = Cli.run("run", "-c", config.toString());
    assertThat(refused.exitCode()).as(refused.out()).isEqualTo(2);
    assertThat(mark).as("a run refused at start-up holds no work there").doesNotExist();

    try (EmbeddedPostgresServer server =
            EmbeddedPostgresServer.start(dir.resolve("wd/postgres"), 0, List.of("main"));
        Connection c =
            DriverManager.getConnection(
                server.jdbcUrl("main"), EmbeddedPostgresServer.SUPERUSER, null);
        Statement st = c.createStatement()) {
      st.execute("CREATE TABLE events (id bigint PRIMARY KEY, v text)");
    }
    Path log = dir.resolve("run.log");
    Process run =
        Cli.process(ProcessBuilder.Redirect.to(log.toFile()), "run", "-c", config.toString())
            .start();
    try {
      await()
          .atMost(Duration.ofSeconds(120))
          .alias("run capturing its buffer")
          .until(() -> !run.isAlive() || Files.readString(log).contains("Spillway is running"));
      assertThat(run.isAlive()).as(Files.readString(log)).isTrue();
    } finally {
      run.destroy(); // SIGTERM
      assertThat(run.waitFor(60, TimeUnit.SECONDS)).as("run stopped").isTrue();
    }
    assertThat(mark).exists();

    Cli.Result quickstart = Cli.run("quickstart", "-c", config.toString());
    assertThat(quickstart.exitCode()).as(quickstart.out()).isEqualTo(2);
    assertThat(quickstart.err())
        .startsWith(config + ": working-dir is ")
        .contains(
            ", where 'run' keeps its embedded PostgreSQL or Kafka, whose replication slot, topics"
                + " and consumer groups the quickstart would take over: give the quickstart a"
                + " working directory of its own")
        .contains("or delete " + mark.toAbsolutePath());
    assertThat(dir.resolve("wd/demo")).as("nothing of the demo written").doesNotExist();
  }

  @Test
  void should_capture_the_demo_changes_and_exit_0_twice_in_a_row(@TempDir Path dir)
      throws Exception {
    Path config = dir.resolve("spillway.yml");
    Files.writeString(config, "working-dir: wd\nhttp:\n  port: 0\n");

    Cli.Result first = Cli.run("quickstart", "-c", config.toString());
    assertThat(first.exitCode()).as(first.err()).isZero();
    assertThat(first.out())
        .contains("Topic spillway.buffers.contact_activity_events.events: 10 records")
        .contains("public.contact_activity_events inserted id=")
        .containsPattern(
            "merge_requests 0 +ci_pipelines 0 +ci_builds 0 +head_pipeline_id 0 +packages 0")
        .contains(
            "300 merge requests, 60 pipelines and 3000 builds deleted, 100 head pipelines"
                + " nullified, 30 packages set to status 4")
        .containsPattern(
            "Buffer contact_activity_events: 10 rows delivered to http://127\\.0\\.0\\.1:\\d+/bulk"
                + " in 3 bulk calls \\(rows per call: 4, 4, 2; 3 distinct Idempotency-Keys\\); 0 rows"
                + " left in the table");

    // The demo's ci database keeps no slot to hold the server's WAL; main keeps its own.
    try (EmbeddedPostgresServer server =
            EmbeddedPostgresServer.start(dir.resolve("wd/postgres"), 0, List.of("main", "ci"));
        Connection c =
            DriverManager.getConnection(
                server.jdbcUrl("ci"), EmbeddedPostgresServer.SUPERUSER, null);
        Statement st = c.createStatement();
        ResultSet rs =
            st.executeQuery(
                "SELECT string_agg(database || ' ' || slot_name, ', ' ORDER BY database)"
                    + " FROM pg_replication_slots")) {
      rs.next();
      assertThat(rs.getString(1)).isEqualTo("main spillway_main");
    }

    // A second run continues on the same data: main's captured tables and slot are reused, ci's
    // slot made anew. Its HTTP
    // port is held by another process (a running Spillway, say): it takes a free one.
    try (ServerSocket taken = new ServerSocket(0)) {
      int port = taken.getLocalPort();
      Files.writeString(config, "working-dir: wd\nhttp:\n  port: " + port + "\n");
      // Capture's warnings go to its log, not to the command's standard error.
      Logger captureLog = (Logger) LoggerFactory.getLogger("dev.spillway.capture.CaptureEngine");
      ListAppender<ILoggingEvent> logged = new ListAppender<>();
      logged.start();
      captureLog.addAppender(logged);
      Cli.Result second;
      try {
        second = Cli.run("quickstart", "-c", config.toString());
      } finally {
        captureLog.detachAppender(logged);
      }
      assertThat(second.exitCode()).as(second.err()).isZero();
      assertThat(logged.list)
          .extracting(ILoggingEvent::getFormattedMessage)
          .as("ci begins anew, not as a lost slot")
          .isNotEmpty()
          .noneMatch(m -> m.contains("was gone"));
      assertThat(second.out())
          .contains("  HTTP port " + port + " is in use: the quickstart takes a free one.")
          .containsPattern("ready in [0-9.]+ s: Kafka at \\S+, dashboard at http://localhost:\\d+/")
          .doesNotContain("dashboard at http://localhost:" + port + "/")
          .contains("Capture streaming from databases main and ci")
          .contains(
              "300 merge requests, 60 pipelines and 3000 builds deleted, 100 head pipelines"
                  + " nullified, 30 packages set to status 4");
    }
  }
}
