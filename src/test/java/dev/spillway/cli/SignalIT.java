package dev.spillway.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** A command stopped by SIGTERM, as Ctrl+C or a process manager stops it, in a JVM of its own. */
class SignalIT {

  @Test
  void should_stop_the_embedded_postgresql_when_a_benchmark_is_terminated(@TempDir Path dir)
      throws Exception {
    Path config = dir.resolve("spillway.yml");
    Files.writeString(config, "working-dir: wd\n");
    Path postmasterPid =
        dir.resolve("wd/bench/capture/postgres/data/postmaster.pid").toAbsolutePath();
    // Its first step inserts far more rows than it gets time for, so the signal finds it busy.
    Process spillway =
        new ProcessBuilder(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-cp",
                System.getProperty("java.class.path"),
                SpillwayCommand.class.getName(),
                "-c",
                config.toString(),
                "bench",
                "capture",
                "--rows",
                "500000000")
            .redirectErrorStream(true)
            .start();
    Optional<ProcessHandle> postgres = Optional.empty();
    try (BufferedReader out =
        new BufferedReader(
            new InputStreamReader(spillway.getInputStream(), StandardCharsets.UTF_8))) {
      String line;
      while ((line = out.readLine()) != null && !line.startsWith("Capture benchmark:")) {
        // Skip start-up lines until the runtime is up.
      }
      assertThat(line).as("the benchmark started").isNotNull();
      postgres = ProcessHandle.of(Long.parseLong(Files.readAllLines(postmasterPid).get(0).trim()));
      assertThat(postgres).as("the embedded PostgreSQL runs").isPresent();

      spillway.destroy(); // SIGTERM
      assertThat(spillway.waitFor(60, TimeUnit.SECONDS)).as("Spillway exited").isTrue();
      ProcessHandle server = postgres.get();
      await()
          .atMost(Duration.ofSeconds(30))
          .untilAsserted(
              () -> assertThat(server.isAlive()).as("the embedded PostgreSQL runs").isFalse());
    } finally {
      spillway.destroyForcibly();
      // A server left behind by a failed assertion is stopped here (SIGINT: fast shutdown).
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
}
