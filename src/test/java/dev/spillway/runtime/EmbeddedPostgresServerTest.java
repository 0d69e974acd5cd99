package dev.spillway.runtime;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Optional;
import org.junit.jupiter.api.Test;

class EmbeddedPostgresServerTest {

  /**
   * A server that exited where nothing reaps it (its parent, the first process, being this one in a
   * container) stays a zombie, which Java takes as alive: it is a failure all the same.
   */
  @Test
  void should_take_a_server_exited_and_never_reaped_for_a_failure() throws Exception {
    assumeTrue(Files.isDirectory(Path.of("/proc/self")), "Linux's /proc");
    // The shell's child exits at once; the shell becomes a sleep that never reaps it.
    Process parent = new ProcessBuilder("sh", "-c", "sleep 0 & exec sleep 30").start();
    try {
      ProcessHandle zombie =
          await()
              .atMost(Duration.ofSeconds(10))
              .until(() -> parent.toHandle().children().findFirst(), Optional::isPresent)
              .orElseThrow();
      await().atMost(Duration.ofSeconds(10)).until(() -> EmbeddedPostgresServer.ended(zombie));
      assertThat(zombie.isAlive()).as("as Java sees it").isTrue();

      assertThat(EmbeddedPostgresServer.exited(zombie, Path.of("pg")))
          .contains(
              "the embedded PostgreSQL (pid " + zombie.pid() + ") exited; pg/server.log says why");
      assertThat(EmbeddedPostgresServer.exited(parent.toHandle(), Path.of("pg")))
          .as("a server running")
          .isEmpty();
    } finally {
      parent.destroy();
      parent.waitFor();
    }
  }
}
