package dev.spillway.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.sun.net.httpserver.HttpServer;
import dev.spillway.runtime.RuntimeInfo;
import dev.spillway.runtime.WorkingDirectory;
import dev.spillway.testing.Cli;
import dev.spillway.testing.EmbeddedInfra;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code lfk status} beside a running process, on a real Kafka. */
class LfkStatusIT {
  @Test
  void should_show_the_backlog_when_the_running_process_cannot_give_its_counts(@TempDir Path dir)
      throws Exception {
    EmbeddedInfra infra = EmbeddedInfra.get();
    Path config = dir.resolve("spillway.yml");
    Files.writeString(config, "working-dir: wd\nkafka:\n  topic-prefix: lfkstatusit\n");
    // A process whose metrics fail (stopping, say): its port answers 503.
    HttpServer failing = HttpServer.create(new InetSocketAddress("localhost", 0), 0);
    failing.createContext(
        "/",
        ex -> {
          ex.sendResponseHeaders(503, -1);
          ex.close();
        });
    failing.start();
    int port = failing.getAddress().getPort();
    try (WorkingDirectory wd = WorkingDirectory.acquire(dir.resolve("wd"))) {
      wd.publish(
          new RuntimeInfo(ProcessHandle.current().pid(), port, infra.bootstrapServers(), Map.of()));

      Cli.Result r = Cli.run("lfk", "status", "--json", "-c", config.toString());

      assertThat(r.exitCode()).as(r.err()).isZero();
      assertThat(r.out().strip()).as("the backlog, read from Kafka").isEqualTo("[ ]");
      assertThat(r.err().strip())
          .isEqualTo(
              "PROCESSED counts could not be read from the running process: it answered /metrics"
                  + " on port "
                  + port
                  + " with HTTP 503.");
    } finally {
      failing.stop(0);
    }
  }
}
