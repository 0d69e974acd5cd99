package dev.spillway.runtime;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Starting the embedded PostgreSQL on data of its own. */
class EmbeddedPostgresServerIT {
  @TempDir Path dir;

  @Test
  void should_say_what_the_server_said_when_it_does_not_start_and_leave_nothing_running()
      throws Exception {
    Path postgres = dir.resolve("postgres");
    EmbeddedPostgresServer.start(postgres, 0, List.of()).close();
    // A setting the server cannot read: it refuses to start.
    Files.writeString(
        postgres.resolve("data").resolve("postgresql.conf"),
        "\nshared_buffers = lots\n",
        StandardOpenOption.APPEND);

    assertThatThrownBy(
            () -> EmbeddedPostgresServer.start(postgres, 0, List.of(), Duration.ofSeconds(5)))
        .isInstanceOf(IOException.class)
        .hasMessageStartingWith("The embedded PostgreSQL in " + postgres + " did not start: ")
        .hasMessageContaining(postgres.resolve("server.log") + " says: ")
        .hasMessageContaining("shared_buffers")
        .hasMessageContaining("lots")
        .as("nothing of the start and stop before, which went well")
        .hasMessageNotContaining("ready to accept connections")
        .hasMessageNotContaining("shut down");
    assertThat(EmbeddedPostgresServer.serverOf(postgres.resolve("data"))).isEmpty();
  }

  @Test
  void should_stop_a_server_still_starting_when_the_start_gives_up_waiting() throws Exception {
    Path postgres = dir.resolve("postgres");
    EmbeddedPostgresServer.start(postgres, 0, List.of()).close();

    // A wait shorter than any start: the server comes up after the start gave up on it.
    assertThatThrownBy(
            () -> EmbeddedPostgresServer.start(postgres, 0, List.of(), Duration.ofMillis(1)))
        .isInstanceOf(IOException.class)
        .hasMessageContaining("did not start: Gave up waiting");

    // Nor one coming up a little after the start gave up on it.
    await()
        .during(Duration.ofSeconds(3))
        .atMost(Duration.ofSeconds(10))
        .until(() -> EmbeddedPostgresServer.serverOf(postgres.resolve("data")).isEmpty());
  }

  @Test
  void should_return_from_close_only_once_the_server_has_stopped() throws Exception {
    Path postgres = dir.resolve("postgres");
    EmbeddedPostgresServer server = EmbeddedPostgresServer.start(postgres, 0, List.of());
    ProcessHandle postmaster =
        EmbeddedPostgresServer.serverOf(postgres.resolve("data")).orElseThrow();
    // Held still, the server cannot act on the stop it is sent, as one slow to shut down: the
    // tool that asks it waits five seconds, then gives up.
    signal("STOP", postmaster);
    try {
      CompletableFuture<Void> closed =
          CompletableFuture.runAsync(
              () -> {
                try {
                  server.close();
                } catch (IOException e) {
                  throw new UncheckedIOException(e);
                }
              });
      await().atMost(Duration.ofSeconds(10)).until(() -> stopTools().findAny().isPresent());
      await().atMost(Duration.ofSeconds(30)).until(() -> stopTools().findAny().isEmpty());

      await()
          .during(Duration.ofSeconds(2))
          .atMost(Duration.ofSeconds(5))
          .until(() -> !closed.isDone());
      signal("CONT", postmaster);
      closed.get(60, TimeUnit.SECONDS);
      assertThat(EmbeddedPostgresServer.ended(postmaster)).isTrue();
    } finally {
      signal("CONT", postmaster);
    }
  }

  /** This process's {@code pg_ctl} runs. */
  private static Stream<ProcessHandle> stopTools() {
    return ProcessHandle.current()
        .descendants()
        .filter(p -> p.info().command().map(c -> c.endsWith("pg_ctl")).orElse(false));
  }

  private static void signal(String name, ProcessHandle process) throws Exception {
    if (process.isAlive()) {
      new ProcessBuilder("kill", "-" + name, Long.toString(process.pid()))
          .inheritIO()
          .start()
          .waitFor();
    }
  }

  /** Whatever a failing test left running on its data, before that data is deleted. */
  @AfterEach
  void stopLeftRunning() throws IOException {
    EmbeddedPostgresServer.stopLeftRunning(dir.resolve("postgres").resolve("data"));
  }
}
