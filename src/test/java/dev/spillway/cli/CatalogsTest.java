package dev.spillway.cli;

import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

import dev.spillway.config.ConfigException;
import dev.spillway.config.SpillwayConfig;
import dev.spillway.runtime.RuntimeInfo;
import dev.spillway.runtime.WorkingDirectory;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class CatalogsTest {
  @Test
  void should_fail_at_once_when_the_embedded_server_cannot_start(@TempDir Path base)
      throws Exception {
    SpillwayConfig config = SpillwayConfig.defaults(base);
    Files.createDirectories(config.workingDir());
    // Where the server's directory should be, a file: its start fails before anything runs.
    Files.writeString(config.workingDir().resolve("postgres"), "not a directory");

    // A hang, not a speed, is what this bounds: the stop once waited 90 s for a start that had
    // already failed.
    assertTimeoutPreemptively(
        Duration.ofSeconds(60),
        () ->
            assertThatThrownBy(() -> Catalogs.open(config).close())
                .isInstanceOf(FileAlreadyExistsException.class));
  }

  @Test
  void should_refuse_a_running_process_on_configured_databases_rather_than_read_none(
      @TempDir Path base) throws Exception {
    SpillwayConfig config = SpillwayConfig.defaults(base);
    try (WorkingDirectory running = WorkingDirectory.acquire(config.workingDir())) {
      // As run with a configuration of its own databases publishes itself: their URLs left out.
      long pid = ProcessHandle.current().pid();
      running.publish(new RuntimeInfo(pid, 1, "localhost:9092", Map.of()));

      assertThatThrownBy(() -> Catalogs.open(config).close())
          .isInstanceOf(ConfigException.class)
          .hasMessage(
              "(defaults): working-dir is "
                  + config.workingDir()
                  + ", where the Spillway of process "
                  + pid
                  + " runs on configured databases, which it names to no other command: give its"
                  + " configuration with -c.");
    }
  }

  @Test
  void should_start_no_server_once_a_signal_began_the_stop() {
    Catalogs.Started started = new Catalogs.Started();
    started.close(); // a signal, after the working directory was taken, before the server's start

    // The stop waited for nothing: a server started now would outlive the process.
    assertThatThrownBy(started::starting)
        .isInstanceOf(IllegalStateException.class)
        .hasMessage("Spillway is stopping");
  }
}
