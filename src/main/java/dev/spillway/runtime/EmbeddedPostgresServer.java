package dev.spillway.runtime;

import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.Collection;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One embedded PostgreSQL server whose data directory survives restarts; each Spillway database
 * name is a database inside it. Configured for change capture: logical WAL, replication slots, and
 * synchronous commit on (off delays the WAL writer by up to 200 ms, which capture latency would
 * show).
 *
 * <p>Works as root too: the embedded distribution runs the server in a user namespace then.
 */
public final class EmbeddedPostgresServer implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(EmbeddedPostgresServer.class);
  public static final String SUPERUSER = "postgres";

  private final EmbeddedPostgres postgres;

  private EmbeddedPostgresServer(EmbeddedPostgres postgres) {
    this.postgres = postgres;
  }

  /**
   * Starts the server with data under {@code dir}/data, creating each named database that does not
   * exist yet.
   *
   * @param port the TCP port, or 0 for a free one
   */
  public static EmbeddedPostgresServer start(Path dir, int port, Collection<String> databases)
      throws IOException {
    Path data = dir.resolve("data");
    Path binaries = dir.resolve("binaries");
    Files.createDirectories(dir);
    EmbeddedPostgres.Builder builder =
        EmbeddedPostgres.builder()
            .setDataDirectory(data)
            .setCleanDataDirectory(false)
            .setOverrideWorkingDirectory(binaries.toFile())
            .setRegisterShutdownHook(false)
            .setPGStartupWait(Duration.ofSeconds(60))
            .setServerConfig("wal_level", "logical")
            .setServerConfig("max_wal_senders", "64")
            .setServerConfig("max_replication_slots", "64")
            .setServerConfig("synchronous_commit", "on")
            .setServerConfig("fsync", "on")
            .setServerConfig("max_connections", "200")
            // TCP only: a socket path under a deep working directory can exceed the 107-byte
            // limit of Unix sockets.
            .setServerConfig("unix_socket_directories", "")
            .setServerConfig("listen_addresses", "localhost");
    if (port != 0) {
      builder.setPort(port);
    }
    EmbeddedPostgres postgres = builder.start();
    EmbeddedPostgresServer server = new EmbeddedPostgresServer(postgres);
    try {
      server.createMissing(databases);
    } catch (SQLException e) {
      server.close();
      throw new IOException("Could not create the embedded databases " + databases, e);
    }
    log.info("Embedded PostgreSQL on port {} (data in {})", postgres.getPort(), data);
    return server;
  }

  public int port() {
    return postgres.getPort();
  }

  public String jdbcUrl(String database) {
    return "jdbc:postgresql://localhost:" + port() + "/" + database;
  }

  /** Creates each named database that does not exist yet. */
  public void createMissing(Collection<String> databases) throws SQLException {
    try (Connection c = postgres.getPostgresDatabase().getConnection();
        Statement s = c.createStatement()) {
      for (String name : databases) {
        try (ResultSet rs =
            s.executeQuery(
                "SELECT 1 FROM pg_database WHERE datname = '" + name.replace("'", "''") + "'")) {
          if (!rs.next()) {
            // Database names are checked against [a-z][a-z0-9_]* by the configuration.
            s.execute("CREATE DATABASE \"" + name + "\"");
          }
        }
      }
    }
  }

  @Override
  public void close() throws IOException {
    postgres.close();
    log.info("Embedded PostgreSQL stopped");
  }
}
