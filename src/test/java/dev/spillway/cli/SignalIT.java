package dev.spillway.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.spillway.runtime.EmbeddedPostgresServer;
import dev.spillway.testing.Cli;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** A command stopped by SIGTERM, as Ctrl+C or a process manager stops it, in a JVM of its own. */
class SignalIT {
  @TempDir Path dir;
  private Path config;
  private Path postmasterPid;

  /** The pid file of the server a sweep starts in the working directory. */
  private Path sweepPid;

  @BeforeEach
  void setUp() throws IOException {
    config = dir.resolve("spillway.yml");
    Files.writeString(config, "working-dir: wd\n");
    postmasterPid = dir.resolve("wd/bench/capture/postgres/data/postmaster.pid").toAbsolutePath();
    sweepPid = dir.resolve("wd/postgres/data/postmaster.pid").toAbsolutePath();
  }

  @Test
  void should_stop_the_embedded_postgresql_when_a_benchmark_is_terminated() throws Exception {
    // Its first step inserts far more rows than it gets time for, so the signal finds it busy.
    Path log = dir.resolve("out.log");
    Process spillway = benchCapture(ProcessBuilder.Redirect.to(log.toFile()));
    Optional<ProcessHandle> postgres = Optional.empty();
    try {
      await()
          .atMost(Duration.ofSeconds(120))
          .until(() -> !spillway.isAlive() || Files.readString(log).contains("Capture benchmark:"));
      assertThat(Files.readString(log)).as("the benchmark started").contains("Capture benchmark:");
      postgres = pid(postmasterPid).flatMap(ProcessHandle::of);
      assertThat(postgres).as("the embedded PostgreSQL runs").isPresent();

      stopsWithItsServer(spillway, log, postgres.get());
    } finally {
      spillway.destroyForcibly();
      stopLeftServer(postgres);
    }
  }

  /**
   * Sends SIGTERM to a command whose embedded server runs: it must log that it stops and has
   * stopped, exit, and leave the server stopped.
   */
  private static void stopsWithItsServer(Process spillway, Path log, ProcessHandle server)
      throws Exception {
    spillway.destroy(); // SIGTERM
    assertThat(spillway.waitFor(60, TimeUnit.SECONDS)).as("Spillway exited").isTrue();
    assertThat(Files.readAllLines(log))
        .as("the log says the stop began and ended")
        .anyMatch(l -> l.contains("Stopping on a signal"))
        .anyMatch(l -> l.endsWith("Stopped"));
    await()
        .atMost(Duration.ofSeconds(30))
        .untilAsserted(
            () -> assertThat(server.isAlive()).as("the embedded PostgreSQL runs").isFalse());
  }

  @Test
  void should_stop_the_embedded_postgresql_when_terminated_while_it_starts() throws Exception {
    signalWhileTheServerStarts(
        benchCapture(ProcessBuilder.Redirect.to(dir.resolve("spillway.log").toFile())),
        postmasterPid);
  }

  /**
   * Sends SIGTERM as the server the command starts writes its pid file, before it takes connections
   * (and before Spillway creates its databases): the signal comes within that start, which must end
   * with the server stopped.
   */
  private static void signalWhileTheServerStarts(Process spillway, Path pidFile) throws Exception {
    Optional<ProcessHandle> postgres = Optional.empty();
    try {
      long pid =
          await()
              .atMost(Duration.ofSeconds(120))
              .pollInterval(Duration.ofMillis(5))
              .until(() -> pid(pidFile), Optional::isPresent)
              .get();
      spillway.destroy(); // SIGTERM
      postgres = ProcessHandle.of(pid);
      assertThat(postgres).as("the embedded PostgreSQL starting").isPresent();
      assertThat(spillway.waitFor(120, TimeUnit.SECONDS)).as("Spillway exited").isTrue();
      ProcessHandle server = postgres.get();
      await()
          .atMost(Duration.ofSeconds(30))
          .untilAsserted(
              () -> assertThat(server.isAlive()).as("the embedded PostgreSQL runs").isFalse());
      assertThat(pidFile).as("the server's pid file, removed as it stops").doesNotExist();
    } finally {
      spillway.destroyForcibly();
      stopLeftServer(postgres, pidFile);
    }
  }

  @Test
  void should_stop_a_postgresql_a_killed_process_left_running_when_it_starts_again()
      throws Exception {
    Path log = dir.resolve("killed.log");
    Process spillway = benchCapture(ProcessBuilder.Redirect.to(log.toFile()));
    Optional<ProcessHandle> postgres = Optional.empty();
    Optional<ProcessHandle> restarted = Optional.empty();
    try {
      await()
          .atMost(Duration.ofSeconds(120))
          .until(() -> !spillway.isAlive() || Files.readString(log).contains("Capture benchmark:"));
      postgres = pid(postmasterPid).flatMap(ProcessHandle::of);
      assertThat(postgres).as("the embedded PostgreSQL runs").isPresent();

      spillway.destroyForcibly(); // SIGKILL: no shutdown hook, no stop
      assertThat(spillway.waitFor(60, TimeUnit.SECONDS)).as("Spillway was killed").isTrue();
      assertThat(postgres.get().isAlive()).as("its server outlived it").isTrue();

      Path server = postmasterPid.getParent().getParent();
      try (EmbeddedPostgresServer again = EmbeddedPostgresServer.start(server, 0, List.of())) {
        restarted = pid(postmasterPid).flatMap(ProcessHandle::of);
        // Exited; Java sees it alive until the system's first process has reaped it.
        ProcessHandle left = postgres.get();
        await().atMost(Duration.ofSeconds(30)).until(() -> !left.isAlive());
        assertThat(pid(postmasterPid)).as("the new server's pid file").isPresent();
        try (Connection c =
                DriverManager.getConnection(
                    again.jdbcUrl("postgres"), EmbeddedPostgresServer.SUPERUSER, "");
            ResultSet rs = c.createStatement().executeQuery("SELECT pg_postmaster_start_time()")) {
          assertThat(rs.next()).as("the new server answers").isTrue();
        }
      }
    } finally {
      spillway.destroyForcibly();
      stopLeftServer(postgres);
      stopLeftServer(restarted);
    }
  }

  @Test
  void should_stop_the_embedded_postgresql_a_command_started_to_inspect_when_it_is_terminated()
      throws Exception {
    Path pidFile = sweepPid;
    try (EmbeddedPostgresServer server =
            EmbeddedPostgresServer.start(pidFile.getParent().getParent(), 0, List.of("main"));
        Connection c =
            DriverManager.getConnection(
                server.jdbcUrl("main"), EmbeddedPostgresServer.SUPERUSER, "")) {
      c.createStatement()
          .execute(
              "CREATE TABLE parents (id bigint PRIMARY KEY);"
                  + " CREATE TABLE children (id bigint PRIMARY KEY, parent_id bigint);"
                  + " CREATE INDEX ON children (parent_id); INSERT INTO children VALUES (1, 7)");
    }
    Path log = dir.resolve("sweep.log");
    // No process runs: the sweep starts the working directory's server, finds parent 7 missing at
    // its first look, then waits an hour for its second.
    Process spillway = dryRunSweep("--recheck-after", "1h");
    Optional<ProcessHandle> postgres = Optional.empty();
    try {
      await()
          .atMost(Duration.ofSeconds(120))
          .alias("the sweep's first look at the children")
          .until(() -> !spillway.isAlive() || childrenRead(pidFile));
      postgres = pid(pidFile).flatMap(ProcessHandle::of);
      assertThat(postgres).as("the embedded PostgreSQL the sweep started").isPresent();

      stopsWithItsServer(spillway, log, postgres.get());
    } finally {
      spillway.destroyForcibly();
      // Still unknown when the wait failed: the server the sweep started, if any.
      stopLeftServer(postgres, pidFile);
    }
  }

  @Test
  void should_stop_the_embedded_postgresql_a_command_is_starting_to_inspect_when_terminated()
      throws Exception {
    signalWhileTheServerStarts(dryRunSweep(), sweepPid);
  }

  /**
   * {@code lfk sweep --dry-run} of {@code children → parents} in a JVM of its own, with the
   * embedded defaults and no process running, so it starts the working directory's server; what it
   * prints goes to {@code sweep.log}.
   */
  private Process dryRunSweep(String... more) throws IOException {
    Files.writeString(
        config,
        """
        working-dir: wd
        loose-foreign-keys:
          definitions:
            children:
              - { table: parents, column: parent_id, on_delete: async_delete }
        """);
    List<String> args =
        new ArrayList<>(List.of("lfk", "sweep", "-c", config.toString(), "--dry-run"));
    args.addAll(List.of(more));
    return Cli.process(
            ProcessBuilder.Redirect.to(dir.resolve("sweep.log").toFile()),
            args.toArray(String[]::new))
        .start();
  }

  /**
   * Whether the server counts a read of {@code children} through an index: the sweep's first look
   * (the table's creation scanned it without one).
   */
  private static boolean childrenRead(Path postmasterPid) {
    try {
      List<String> lines = Files.readAllLines(postmasterPid);
      if (lines.size() < 4) {
        return false;
      }
      try (Connection c =
              DriverManager.getConnection(
                  "jdbc:postgresql://localhost:" + lines.get(3).trim() + "/main",
                  EmbeddedPostgresServer.SUPERUSER,
                  "");
          ResultSet rs =
              c.createStatement()
                  .executeQuery(
                      "SELECT idx_scan FROM pg_stat_user_tables" + " WHERE relname = 'children'")) {
        return rs.next() && rs.getLong(1) > 0;
      }
    } catch (IOException | java.sql.SQLException e) {
      return false; // not started yet
    }
  }

  /**
   * {@code bench capture} in a JVM of its own; its first step inserts far more rows than needed.
   */
  private Process benchCapture(ProcessBuilder.Redirect output) throws IOException {
    return Cli.process(output, "-c", config.toString(), "bench", "capture", "--rows", "500000000")
        .start();
  }

  /**
   * The server's pid on the first line of a postmaster.pid file, once it is there and complete.
   * initdb's bootstrap backend writes the file too, with its pid negated; that one is skipped.
   */
  private static Optional<Long> pid(Path postmasterPid) {
    try {
      List<String> lines = Files.readAllLines(postmasterPid);
      long pid = lines.size() > 1 ? Long.parseLong(lines.get(0).trim()) : 0;
      return pid > 0 ? Optional.of(pid) : Optional.empty();
    } catch (IOException | NumberFormatException e) {
      return Optional.empty();
    }
  }

  /** The same, or the server whose pid file that is, when a wait failed before it was known. */
  private static void stopLeftServer(Optional<ProcessHandle> postgres, Path pidFile) {
    stopLeftServer(postgres.or(() -> pid(pidFile).flatMap(ProcessHandle::of)));
  }

  /** Stops a server a failed assertion left behind (SIGINT: fast shutdown). */
  private static void stopLeftServer(Optional<ProcessHandle> postgres) {
    postgres
        .filter(ProcessHandle::isAlive)
        .ifPresent(
            p -> {
              try {
                new ProcessBuilder("kill", "-INT", Long.toString(p.pid())).start().waitFor();
              } catch (Exception e) {
                throw new IllegalStateException(e);
              }
            });
  }
}
