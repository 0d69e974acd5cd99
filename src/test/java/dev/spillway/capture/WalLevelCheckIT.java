package dev.spillway.capture;

import static dev.spillway.config.DatabaseConfig.DEFAULT_LOCK_TIMEOUT;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.spillway.event.TableName;
import dev.spillway.event.Topics;
import dev.spillway.jdbc.DatabaseEndpoint;
import dev.spillway.jdbc.Databases;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** A server without logical WAL is refused before anything is changed in it. */
class WalLevelCheckIT {

  @Test
  void should_refuse_a_database_without_logical_wal(@TempDir Path dir) throws Exception {
    try (EmbeddedPostgres pg =
            EmbeddedPostgres.builder()
                .setDataDirectory(dir.resolve("data"))
                .setOverrideWorkingDirectory(
                    Path.of("target", "it-infra", "postgres", "binaries").toAbsolutePath().toFile())
                .setServerConfig("wal_level", "replica")
                .setServerConfig("unix_socket_directories", "")
                .start();
        Databases databases =
            new Databases(
                List.of(
                    new DatabaseEndpoint(
                        "main",
                        pg.getJdbcUrl("postgres", "postgres"),
                        "postgres",
                        null,
                        2,
                        DEFAULT_LOCK_TIMEOUT)),
                new SimpleMeterRegistry())) {
      CaptureSettings settings =
          new CaptureSettings(
              "localhost:1",
              new Topics("walcheck"),
              1,
              (short) 1,
              Map.of(),
              Duration.ofMillis(10),
              Duration.ofSeconds(10),
              100,
              Duration.ofSeconds(1));
      CaptureRoute route =
          new CaptureRoute(
              "main", new TableName("public", "projects"), ChangeKind.DELETE, "walcheck.lfk.x");
      assertThatThrownBy(
              () ->
                  Capture.start(
                      new CapturePlan(List.of(route)),
                      databases,
                      settings,
                      new CaptureStats(null),
                      Clock.systemUTC()))
          .isInstanceOf(CaptureSetupException.class)
          .hasMessage(
              "Database main runs with wal_level=replica; change capture needs wal_level=logical"
                  + " (set it in postgresql.conf and restart the server).");
    }
  }
}
