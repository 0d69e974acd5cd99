package dev.spillway.runtime;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.spillway.config.ConfigLoader;
import dev.spillway.config.SpillwayConfig;
import dev.spillway.jdbc.Databases;
import dev.spillway.ops.StatusClient;
import dev.spillway.ops.StatusReport;
import dev.spillway.testing.EmbeddedInfra;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.Optional;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** A whole runtime on embedded parts: status and metrics name what stopped work and why. */
class RuntimeStatusIT {

  @Test
  void should_name_the_indicator_that_stopped_work_in_status_and_metrics(@TempDir Path dir)
      throws Exception {
    SpillwayConfig config =
        ConfigLoader.parse(
            "http:\n  port: 0\nhealth:\n  interval: 100ms\n  connections-throttle: 0.001\n"
                + "  connections-stop: 0.002\n",
            "test.yml",
            null,
            dir,
            name -> null);
    try (SpillwayRuntime runtime = SpillwayRuntime.start(config, Set.of(), Clock.systemUTC())) {
      await()
          .atMost(Duration.ofSeconds(30))
          .until(() -> runtime.health().state("main", null).isStop());

      StatusReport status = StatusClient.fetch(runtime.httpPort());
      assertThat(status.health())
          .anySatisfy(
              h -> {
                assertThat(h.database()).isEqualTo("main");
                assertThat(h.state()).isEqualTo("STOP");
                assertThat(h.reason())
                    .startsWith("connections: ")
                    .contains("in use of the")
                    .contains("connections max_connections leaves unreserved");
              });

      HttpResponse<String> metrics =
          HttpClient.newHttpClient()
              .send(
                  HttpRequest.newBuilder(
                          URI.create("http://localhost:" + runtime.httpPort() + "/metrics"))
                      .build(),
                  HttpResponse.BodyHandlers.ofString());
      assertThat(metrics.body())
          .contains(
              "spillway_health_state{database=\"main\",indicator=\"connections\",table=\"\"} 3.0")
          .contains(
              "spillway_health_state{database=\"main\",indicator=\"combined\",table=\"\"} 3.0")
          .contains("hikaricp_connections");
    }
  }

  @Test
  void should_write_no_configured_database_url_into_the_working_directory(@TempDir Path dir)
      throws Exception {
    try (Databases databases = EmbeddedInfra.get().databases("published")) {
      String url = databases.endpoint("published").url() + "?password=s3cret-in-the-url";
      SpillwayConfig config =
          ConfigLoader.parse(
              "http:\n  port: 0\ndatabases:\n  main: { url: \""
                  + url
                  + "\", username: "
                  + databases.endpoint("published").username()
                  + " }\n",
              "test.yml",
              null,
              dir,
              name -> null);
      try (SpillwayRuntime runtime = SpillwayRuntime.start(config, Set.of(), Clock.systemUTC())) {
        String published = Files.readString(config.workingDir().resolve("runtime.json"));

        assertThat(published).doesNotContain("s3cret");
        assertThat(WorkingDirectory.running(config.workingDir()))
            .hasValueSatisfying(
                info -> {
                  assertThat(info.httpPort()).isEqualTo(runtime.httpPort());
                  assertThat(info.databases()).isEmpty();
                });
      }
    }
  }

  @Test
  void should_fail_when_the_embedded_postgresql_exits_without_being_stopped(@TempDir Path dir)
      throws Exception {
    SpillwayConfig config =
        ConfigLoader.parse("http:\n  port: 0\n", "test.yml", null, dir, n -> null);
    try (SpillwayRuntime runtime = SpillwayRuntime.start(config, Set.of(), Clock.systemUTC())) {
      assertThat(runtime.failure()).isEmpty();
      ProcessHandle server =
          EmbeddedPostgresServer.serverOf(config.workingDir().resolve("postgres").resolve("data"))
              .orElseThrow();

      // Ended from outside, as by an operator or after a failure it cannot recover from.
      new ProcessBuilder("kill", "-INT", Long.toString(server.pid())).start().waitFor();
      server.onExit().get(60, java.util.concurrent.TimeUnit.SECONDS);

      await()
          .atMost(Duration.ofSeconds(10))
          .untilAsserted(
              () ->
                  assertThat(runtime.failure())
                      .hasValue(
                          "the embedded PostgreSQL (pid "
                              + server.pid()
                              + ") exited; "
                              + config.workingDir().resolve("postgres").resolve("server.log")
                              + " says why"));
    }
  }

  @Test
  void should_not_take_the_embedded_postgresql_ending_during_a_stop_for_a_failure(@TempDir Path dir)
      throws Exception {
    SpillwayConfig config =
        ConfigLoader.parse("http:\n  port: 0\n", "test.yml", null, dir, n -> null);
    SpillwayRuntime runtime = SpillwayRuntime.start(config, Set.of(), Clock.systemUTC());
    ch.qos.logback.classic.Logger zonky =
        (ch.qos.logback.classic.Logger) org.slf4j.LoggerFactory.getLogger("io.zonky");
    ch.qos.logback.core.read.ListAppender<ch.qos.logback.classic.spi.ILoggingEvent> said =
        new ch.qos.logback.core.read.ListAppender<>();
    said.start();
    zonky.addAppender(said);
    try {
      ProcessHandle server =
          EmbeddedPostgresServer.serverOf(config.workingDir().resolve("postgres").resolve("data"))
              .orElseThrow();
      // As systemd's stop signals every process of the service at once: the server ends before
      // the runtime's stop reaches it (fast shutdown here, to have it ended before the stop).
      new ProcessBuilder("kill", "-INT", Long.toString(server.pid())).start().waitFor();
      server.onExit().get(30, java.util.concurrent.TimeUnit.SECONDS);
      assertThat(runtime.failure()).as("before the stop, a failure").isPresent();

      Thread stop = new Thread(runtime::close);
      long began = System.nanoTime();
      stop.start();
      // What the service manager's watch (run's loop, /livez) reads while the stop goes on,
      // once it has begun (the stop says so first thing; 100 ms is room for the thread to start).
      java.util.List<Optional<String>> read = new java.util.ArrayList<>();
      long until = began + Duration.ofSeconds(120).toNanos();
      while (stop.isAlive() && System.nanoTime() < until) {
        if (System.nanoTime() - began > Duration.ofMillis(100).toNanos()) {
          read.add(runtime.failure());
        }
        stop.join(10);
      }

      assertThat(stop.isAlive()).as("stopped within 2 min").isFalse();
      assertThat(read).as("read while it stopped").isNotEmpty().containsOnly(Optional.empty());
      BenignWarningFilter shown = new BenignWarningFilter();
      assertThat(said.list)
          .filteredOn(e -> e.getLevel().isGreaterOrEqual(ch.qos.logback.classic.Level.WARN))
          .as("nothing shown of the stop tool finding no server to stop")
          .isNotEmpty()
          .allSatisfy(
              e ->
                  assertThat(shown.decide(e))
                      .as(e.getFormattedMessage())
                      .isEqualTo(ch.qos.logback.core.spi.FilterReply.DENY));
    } finally {
      zonky.detachAppender(said);
      runtime.close(); // a second close does nothing
    }
  }
}
