package dev.spillway.testing;

import static dev.spillway.config.DatabaseConfig.DEFAULT_LOCK_TIMEOUT;

import dev.spillway.jdbc.DatabaseEndpoint;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import org.testcontainers.kafka.KafkaContainer;
import org.testcontainers.postgresql.PostgreSQLContainer;

/**
 * The same parts as {@link EmbeddedInfra} from container images, for machines with a Docker engine.
 * Started once per JVM; Testcontainers removes the containers when the JVM exits.
 */
public final class ContainersInfra implements Infra {
  private static ContainersInfra instance;

  private final PostgreSQLContainer postgres;
  private final KafkaContainer kafka;

  private ContainersInfra(PostgreSQLContainer postgres, KafkaContainer kafka) {
    this.postgres = postgres;
    this.kafka = kafka;
  }

  @SuppressWarnings("resource")
  public static synchronized ContainersInfra get() {
    if (instance == null) {
      PostgreSQLContainer postgres =
          new PostgreSQLContainer(Images.POSTGRES)
              .withCommand(
                  "postgres",
                  "-c",
                  "wal_level=logical",
                  "-c",
                  "max_replication_slots=64",
                  "-c",
                  "max_wal_senders=64");
      KafkaContainer kafka = new KafkaContainer(Images.KAFKA);
      postgres.start();
      kafka.start();
      instance = new ContainersInfra(postgres, kafka);
    }
    return instance;
  }

  @Override
  public String bootstrapServers() {
    return kafka.getBootstrapServers();
  }

  @Override
  public synchronized DatabaseEndpoint database(String name) {
    try (Connection c =
            DriverManager.getConnection(
                postgres.getJdbcUrl(), postgres.getUsername(), postgres.getPassword());
        Statement s = c.createStatement()) {
      try (ResultSet rs =
          s.executeQuery("SELECT 1 FROM pg_database WHERE datname = '" + name + "'")) {
        if (!rs.next()) {
          s.execute("CREATE DATABASE \"" + name + "\"");
        }
      }
    } catch (SQLException e) {
      throw new IllegalStateException(e);
    }
    String url =
        "jdbc:postgresql://" + postgres.getHost() + ":" + postgres.getMappedPort(5432) + "/" + name;
    return new DatabaseEndpoint(
        name, url, postgres.getUsername(), postgres.getPassword(), 8, DEFAULT_LOCK_TIMEOUT);
  }
}
