package dev.spillway.cli;

import dev.spillway.config.DatabaseConfig;
import dev.spillway.config.SpillwayConfig;
import dev.spillway.jdbc.DatabaseEndpoint;
import dev.spillway.jdbc.Databases;
import dev.spillway.runtime.EmbeddedPostgresServer;
import dev.spillway.runtime.RuntimeInfo;
import dev.spillway.runtime.WorkingDirectory;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.io.IOException;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * Connections to every database a command inspects without running Spillway: the configured ones;
 * with the embedded defaults, the databases of the running process, or else of the working
 * directory's embedded server, started for the command and stopped after it.
 */
final class Catalogs implements AutoCloseable {
  private static final int POOL_SIZE = 2;

  private final Databases databases;
  private final List<AutoCloseable> owned;

  private Catalogs(Databases databases, List<AutoCloseable> owned) {
    this.databases = databases;
    this.owned = owned;
  }

  static Catalogs open(SpillwayConfig config) throws IOException, SQLException {
    List<DatabaseEndpoint> endpoints = new ArrayList<>();
    List<AutoCloseable> owned = new ArrayList<>();
    if (!config.embeddedDatabases()) {
      for (DatabaseConfig d : config.databases().values()) {
        endpoints.add(
            new DatabaseEndpoint(
                d.name(), d.url(), d.username(), d.password(), POOL_SIZE, d.lockTimeout()));
      }
      return new Catalogs(new Databases(endpoints, new SimpleMeterRegistry()), owned);
    }
    Optional<RuntimeInfo> running = WorkingDirectory.running(config.workingDir());
    if (running.isPresent()) {
      running
          .get()
          .databases()
          .forEach(
              (name, url) ->
                  endpoints.add(
                      new DatabaseEndpoint(
                          name,
                          url,
                          EmbeddedPostgresServer.SUPERUSER,
                          null,
                          POOL_SIZE,
                          DatabaseConfig.DEFAULT_LOCK_TIMEOUT)));
      return new Catalogs(new Databases(endpoints, new SimpleMeterRegistry()), owned);
    }
    WorkingDirectory dir = WorkingDirectory.acquire(config.workingDir());
    owned.add(dir);
    try {
      EmbeddedPostgresServer server =
          EmbeddedPostgresServer.start(dir.resolve("postgres"), 0, List.of(SpillwayConfig.MAIN));
      owned.add(0, server);
      for (String name : names(server)) {
        endpoints.add(
            new DatabaseEndpoint(
                name,
                server.jdbcUrl(name),
                EmbeddedPostgresServer.SUPERUSER,
                null,
                POOL_SIZE,
                DatabaseConfig.DEFAULT_LOCK_TIMEOUT));
      }
    } catch (IOException | SQLException | RuntimeException e) {
      closeAll(owned);
      throw e;
    }
    return new Catalogs(new Databases(endpoints, new SimpleMeterRegistry()), owned);
  }

  /** The user databases of the embedded server (the quickstart adds {@code ci}). */
  private static List<String> names(EmbeddedPostgresServer server) throws SQLException {
    List<String> names = new ArrayList<>();
    try (Connection c =
            java.sql.DriverManager.getConnection(
                server.jdbcUrl(SpillwayConfig.MAIN), EmbeddedPostgresServer.SUPERUSER, null);
        Statement s = c.createStatement();
        ResultSet rs =
            s.executeQuery(
                "SELECT datname FROM pg_database WHERE NOT datistemplate"
                    + " AND datname <> 'postgres' ORDER BY datname <> 'main', datname")) {
      while (rs.next()) {
        names.add(rs.getString(1));
      }
    }
    return names;
  }

  Databases databases() {
    return databases;
  }

  @Override
  public void close() {
    databases.close();
    closeAll(owned);
  }

  private static void closeAll(List<AutoCloseable> parts) {
    for (AutoCloseable p : parts) {
      try {
        p.close();
      } catch (Exception e) {
        // Stopping what this command started; nothing else depends on it.
      }
    }
  }
}
