package dev.spillway.cli;

import dev.spillway.config.ConfigException;
import dev.spillway.config.DatabaseConfig;
import dev.spillway.config.SpillwayConfig;
import dev.spillway.jdbc.DatabaseEndpoint;
import dev.spillway.jdbc.Databases;
import dev.spillway.runtime.EmbeddedPostgresServer;
import dev.spillway.runtime.RuntimeInfo;
import dev.spillway.runtime.WorkingDirectory;
import dev.spillway.support.ShutdownHooks;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.io.IOException;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
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

  /** How long a signal's stop waits for a server still starting, to stop it. */
  private static final Duration START_WAIT = Duration.ofSeconds(90);

  private final Databases databases;
  private final Started started;

  private Catalogs(Databases databases, Started started) {
    this.databases = databases;
    this.started = started;
  }

  static Catalogs open(SpillwayConfig config) throws IOException, SQLException {
    List<DatabaseEndpoint> endpoints = new ArrayList<>();
    if (!config.embeddedDatabases()) {
      for (DatabaseConfig d : config.databases().values()) {
        endpoints.add(
            new DatabaseEndpoint(
                d.name(), d.url(), d.username(), d.password(), POOL_SIZE, d.lockTimeout()));
      }
      return new Catalogs(new Databases(endpoints, new SimpleMeterRegistry()), null);
    }
    Optional<RuntimeInfo> running = WorkingDirectory.running(config.workingDir());
    if (running.isPresent() && running.get().databases().isEmpty()) {
      // It names embedded databases alone (a configured URL may carry a password): read with the
      // embedded defaults, its catalogs would look empty.
      throw new ConfigException(
          config.sourceName(),
          null,
          "working-dir",
          "is "
              + config.workingDir()
              + ", where the Spillway of process "
              + running.get().pid()
              + " runs on configured databases, which it names to no other command: give its"
              + " configuration with -c");
    }
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
      return new Catalogs(new Databases(endpoints, new SimpleMeterRegistry()), null);
    }
    Started started = new Started();
    try {
      WorkingDirectory dir = WorkingDirectory.acquire(config.workingDir());
      started.own(dir);
      started.starting();
      EmbeddedPostgresServer server;
      try {
        server =
            EmbeddedPostgresServer.start(dir.resolve("postgres"), 0, List.of(SpillwayConfig.MAIN));
      } catch (IOException | RuntimeException | Error e) {
        started.startEnded(); // nothing started: a stop no longer waits for it
        throw e;
      }
      started.own(server); // and the start ended, in one step: a stop waiting stops it
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
      started.close();
      throw e;
    }
    return new Catalogs(new Databases(endpoints, new SimpleMeterRegistry()), started);
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
    if (started != null) {
      started.close();
    }
  }

  /**
   * What a command started for itself (the working directory's lock, its embedded server), stopped
   * in reverse order when it ends or on SIGINT/SIGTERM, since the server runs in a session of its
   * own and would outlive the JVM. A signal while the server starts waits for its start, then stops
   * it.
   */
  static final class Started implements AutoCloseable {
    private final List<AutoCloseable> parts = new ArrayList<>();
    private final Thread shutdownHook = new Thread(this::closeOnSignal, "spillway-shutdown");
    private boolean starting;
    private boolean closed;

    Started() {
      Runtime.getRuntime().addShutdownHook(shutdownHook);
    }

    /**
     * A server is being started: a stop waits for it.
     *
     * @throws IllegalStateException when the stop has begun (a signal since the directory was
     *     taken), so no server is started that nothing would stop
     */
    synchronized void starting() {
      if (closed) {
        throw new IllegalStateException("Spillway is stopping");
      }
      starting = true;
    }

    /** The server's start has failed: a stop no longer waits for it. */
    synchronized void startEnded() {
      starting = false;
      notifyAll();
    }

    /**
     * Takes a part to stop; one that comes once the stop has begun is stopped at once.
     *
     * @throws IllegalStateException when the stop has begun
     */
    synchronized <T extends AutoCloseable> T own(T part) {
      starting = false;
      notifyAll();
      if (closed) {
        closeQuietly(part);
        throw new IllegalStateException("Spillway is stopping");
      }
      parts.add(0, part);
      return part;
    }

    @Override
    public synchronized void close() {
      closed = true;
      long until = System.nanoTime() + START_WAIT.toNanos();
      while (starting && System.nanoTime() < until) {
        try {
          wait(Math.max(1, (until - System.nanoTime()) / 1_000_000));
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          break;
        }
      }
      parts.forEach(Started::closeQuietly);
      parts.clear();
      ShutdownHooks.remove(shutdownHook);
    }

    /** SIGINT/SIGTERM: the log says the stop began and ended, as for every other command. */
    private void closeOnSignal() {
      log.info("Stopping on a signal: the embedded PostgreSQL this command started");
      close();
      log.info("Stopped");
    }

    private static void closeQuietly(AutoCloseable part) {
      try {
        part.close();
      } catch (Exception e) {
        // Stopping what this command started; nothing else depends on it.
      }
    }
  }
}
