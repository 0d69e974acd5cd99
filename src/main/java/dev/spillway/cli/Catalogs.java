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
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Connections to every database a command inspects without running Spillway: the configured ones;
 * with the embedded defaults, the databases of the running process, or else of the working
 * directory's embedded server, started for the command and stopped after it, or on SIGINT/SIGTERM
 * (the server runs in a session of its own and would outlive the JVM).
 */
final class Catalogs implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(Catalogs.class);
  private static final int POOL_SIZE = 2;

  private final Databases databases;
  private final List<AutoCloseable> owned;
  private final Thread shutdownHook = new Thread(this::closeOnSignal, "spillway-shutdown");
  private boolean closed;

  private Catalogs(Databases databases, List<AutoCloseable> owned) {
    this.databases = databases;
    this.owned = owned;
    if (!owned.isEmpty()) {
      // A signal while the server was starting, before this, finds it unowned: the next start in
      // the working directory stops it.
      Runtime.getRuntime().addShutdownHook(shutdownHook);
    }
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
  public synchronized void close() {
    if (closed) {
      return;
    }
    closed = true;
    try {
      databases.close();
      closeAll(owned);
    } finally {
      if (!owned.isEmpty() && Thread.currentThread() != shutdownHook) {
        try {
          Runtime.getRuntime().removeShutdownHook(shutdownHook);
        } catch (IllegalStateException e) {
          // The JVM is shutting down and runs the hook, which finds nothing left to stop.
        }
      }
    }
  }

  /** SIGINT/SIGTERM: the log says the stop began and ended, as for every other command. */
  private void closeOnSignal() {
    log.info("Stopping on a signal: the embedded PostgreSQL this command started");
    close();
    log.info("Stopped");
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
