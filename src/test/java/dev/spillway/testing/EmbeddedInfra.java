package dev.spillway.testing;

import static dev.spillway.config.DatabaseConfig.DEFAULT_LOCK_TIMEOUT;

import dev.spillway.jdbc.DatabaseEndpoint;
import dev.spillway.runtime.EmbeddedKafka;
import dev.spillway.runtime.EmbeddedPostgresServer;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.sql.SQLException;
import java.util.List;

/** The in-process broker and PostgreSQL, started once per test JVM and stopped when it exits. */
public final class EmbeddedInfra implements Infra {
  private static EmbeddedInfra instance;

  private final EmbeddedKafka kafka;
  private final EmbeddedPostgresServer postgres;

  private EmbeddedInfra(EmbeddedKafka kafka, EmbeddedPostgresServer postgres) {
    this.kafka = kafka;
    this.postgres = postgres;
  }

  public static synchronized EmbeddedInfra get() {
    if (instance == null) {
      try {
        Path root = Path.of("target", "it-infra").toAbsolutePath();
        TestFiles.deleteRecursively(root.resolve("kafka"));
        TestFiles.deleteRecursively(root.resolve("postgres").resolve("data"));
        EmbeddedPostgresServer postgres =
            EmbeddedPostgresServer.start(root.resolve("postgres"), 0, List.of());
        EmbeddedKafka kafka = EmbeddedKafka.start(root.resolve("kafka"), 0);
        instance = new EmbeddedInfra(kafka, postgres);
        Runtime.getRuntime().addShutdownHook(new Thread(instance::stop, "embedded-infra-shutdown"));
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
    return instance;
  }

  @Override
  public String bootstrapServers() {
    return kafka.bootstrapServers();
  }

  public EmbeddedPostgresServer postgres() {
    return postgres;
  }

  @Override
  public synchronized DatabaseEndpoint database(String name) {
    try {
      postgres.createMissing(List.of(name));
    } catch (SQLException e) {
      throw new IllegalStateException(e);
    }
    return new DatabaseEndpoint(
        name,
        postgres.jdbcUrl(name),
        EmbeddedPostgresServer.SUPERUSER,
        null,
        8,
        DEFAULT_LOCK_TIMEOUT);
  }

  private void stop() {
    kafka.close();
    try {
      postgres.close();
    } catch (IOException e) {
      // The JVM is exiting; nothing else to do.
    }
  }
}
