package dev.spillway.cli;

import static org.assertj.core.api.Assertions.assertThat;

import dev.spillway.testing.Cli;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The built jar run as {@code bin/spillway} runs it, {@code -cp} with the jar first: a buffer's
 * {@code class} handler is found on the entries added after it. The configuration's HTTP port is
 * held by the test, so a configuration that loads ends at once in the port's refusal (exit 1),
 * before anything starts, and one that does not ends in its own (exit 2).
 */
class HandlerClassPathIT {
  @TempDir Path dir;

  @Test
  void should_load_a_class_handler_from_the_class_path_added_after_the_jar() throws Exception {
    try (ServerSocket held = new ServerSocket(0, 1, InetAddress.getByName("0.0.0.0"))) {
      Path config = dir.resolve("spillway.yml");
      Files.writeString(
          config,
          "http: { port: "
              + held.getLocalPort()
              + " }\n"
              + "buffers:\n"
              + "  custom:\n"
              + "    handler:\n"
              + "      class: dev.spillway.buffers.BuffersSectionTest$NoopHandler\n");
      String jar = System.getProperty("spillway.jar");
      String tests = Path.of("target", "test-classes").toAbsolutePath().toString();

      Result without = spillway(jar, config);
      Result with = spillway(jar + ":" + tests, config);

      assertThat(without.exit).as(without.out).isEqualTo(2);
      assertThat(without.out)
          .contains(
              "buffers.custom.handler.class names dev.spillway.buffers.BuffersSectionTest$NoopHandler,"
                  + " which is not on the class path");
      assertThat(with.exit).as(with.out).isEqualTo(1);
      assertThat(with.out).contains("HTTP port " + held.getLocalPort() + " is already in use");
    }
  }

  private record Result(int exit, String out) {}

  private Result spillway(String classPath, Path config) throws Exception {
    Process p =
        Cli.process(classPath, ProcessBuilder.Redirect.PIPE, "run", "-c", config.toString())
            .directory(dir.toFile())
            .start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
    return new Result(p.exitValue(), out);
  }
}
