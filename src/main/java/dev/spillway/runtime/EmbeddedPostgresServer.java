package dev.spillway.runtime;

import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
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

  /** How long a server left running by a killed process may take to stop. */
  private static final Duration LEFT_RUNNING_STOP = Duration.ofSeconds(60);

  private final EmbeddedPostgres postgres;
  private final Path dir;

  /**
   * The server's process, watched for an exit no stop asked for; null when it could not be read.
   */
  private final ProcessHandle process;

  private volatile boolean closing;

  private EmbeddedPostgresServer(EmbeddedPostgres postgres, Path dir) throws IOException {
    this.postgres = postgres;
    this.dir = dir;
    this.process = serverOf(dir.resolve("data")).orElse(null);
  }

  /**
   * Why the server no longer runs, when it ended without being stopped (killed, or unable to go on:
   * a full disk it could not recover from): nothing of Spillway's works without it, and only a new
   * start brings it back.
   */
  public Optional<String> failure() {
    return closing ? Optional.empty() : exited(process, dir);
  }

  /**
   * Why the server whose process is {@code process} (null when unknown) no longer runs, once it has
   * ended: reaped or not, as nothing may ever reap it where this process is the first of its
   * container's (the server's parent is the first process).
   */
  static Optional<String> exited(ProcessHandle process, Path dir) {
    if (process == null || !ended(process)) {
      return Optional.empty();
    }
    return Optional.of(
        "the embedded PostgreSQL (pid "
            + process.pid()
            + ") exited; "
            + dir.resolve(LOG)
            + " says why");
  }

  /**
   * Starts the server with data under {@code dir}/data, creating each named database that does not
   * exist yet. The caller holds the directory (its working directory's lock): a server still
   * running on that data was left by a process that ended without stopping it, and is stopped
   * first.
   *
   * <p>What the server and its tools say goes to {@code dir}/server.log; when it does not start,
   * the exception ends with the last of it, and a server left starting is stopped.
   *
   * @param port the TCP port, or 0 for a free one
   */
  public static EmbeddedPostgresServer start(Path dir, int port, Collection<String> databases)
      throws IOException {
    return start(dir, port, databases, STARTUP_WAIT);
  }

  /** How long a start waits for the server to take connections (crash recovery included). */
  static final Duration STARTUP_WAIT = Duration.ofSeconds(60);

  static EmbeddedPostgresServer start(
      Path dir, int port, Collection<String> databases, Duration startupWait) throws IOException {
    Path data = dir.resolve("data");
    Path binaries = dir.resolve("binaries");
    Files.createDirectories(dir);
    stopLeftRunning(data);
    ProcessBuilder.Redirect said = ProcessBuilder.Redirect.appendTo(dir.resolve(LOG).toFile());
    long logBefore = Files.exists(dir.resolve(LOG)) ? Files.size(dir.resolve(LOG)) : 0;
    EmbeddedPostgres.Builder builder =
        EmbeddedPostgres.builder()
            .setDataDirectory(data)
            .setCleanDataDirectory(false)
            .setOverrideWorkingDirectory(binaries.toFile())
            .setRegisterShutdownHook(false)
            .setOutputRedirector(said)
            .setErrorRedirector(said)
            .setPGStartupWait(startupWait)
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
    EmbeddedPostgres postgres;
    try {
      postgres = builder.start();
    } catch (IOException | RuntimeException e) {
      String words = lastWords(dir, logBefore); // before the stop adds its own
      try {
        // One still recovering when the wait ended, say: its pg_ctl, which waits for it, ends
        // first, so the server it started has its pid file to be found by.
        try {
          awaitStartTools(data);
        } finally {
          stopLeftRunning(data);
        }
      } catch (IOException left) {
        e.addSuppressed(left);
      }
      throw new IOException(
          "The embedded PostgreSQL in " + dir + " did not start: " + e.getMessage() + words, e);
    }
    EmbeddedPostgresServer server = new EmbeddedPostgresServer(postgres, dir);
    try {
      server.createMissing(databases);
    } catch (SQLException e) {
      server.close();
      throw new IOException("Could not create the embedded databases " + databases, e);
    }
    log.info("Embedded PostgreSQL on port {} (data in {})", postgres.getPort(), data);
    return server;
  }

  /**
   * Waits for this process's {@code pg_ctl} runs on {@code data} to end: a start it gave up waiting
   * for goes on in {@code pg_ctl -w}, which ends once the server takes connections or fails (60 s
   * at most, its own limit).
   */
  private static void awaitStartTools(Path data) throws IOException {
    String path = data.toString();
    List<ProcessHandle> tools =
        ProcessHandle.current()
            .descendants()
            .filter(
                p ->
                    p.info().command().map(c -> c.endsWith("pg_ctl")).orElse(false)
                        && List.of(p.info().arguments().orElse(new String[0])).contains(path))
            .toList();
    for (ProcessHandle tool : tools) {
      try {
        tool.onExit().get(LEFT_RUNNING_STOP.toSeconds(), TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IOException("Interrupted while waiting for pg_ctl on " + data, e);
      } catch (ExecutionException | TimeoutException e) {
        throw new IOException("pg_ctl on " + data + " did not end within 60 s", e);
      }
    }
  }

  /** Where the server and its tools write what they say. */
  static final String LOG = "server.log";

  /**
   * What the server's log says of this start, written past {@code from}: the server's own messages
   * (the last five), else the last three lines; nothing when it wrote none.
   */
  private static String lastWords(Path dir, long from) {
    byte[] said;
    try (java.nio.channels.SeekableByteChannel log = Files.newByteChannel(dir.resolve(LOG))) {
      // Past what it held before, unless it was emptied meanwhile (rotated, say).
      long start = Math.max(from > log.size() ? 0 : from, log.size() - LAST_WORDS_BYTES);
      java.nio.ByteBuffer buffer = java.nio.ByteBuffer.allocate((int) (log.size() - start));
      log.position(start);
      while (buffer.hasRemaining() && log.read(buffer) >= 0) {
        // reads to the end
      }
      said = java.util.Arrays.copyOf(buffer.array(), buffer.position());
    } catch (IOException e) {
      return "";
    }
    List<String> lines =
        new String(said, java.nio.charset.StandardCharsets.UTF_8)
            .lines()
            .filter(l -> !l.isBlank())
            .toList();
    List<String> server = lines.stream().filter(l -> SERVER_MESSAGE.matcher(l).find()).toList();
    List<String> shown = server.isEmpty() ? lines : server;
    if (shown.isEmpty()) {
      return "";
    }
    int keep = server.isEmpty() ? 3 : 5;
    return "; "
        + dir.resolve(LOG)
        + " says: "
        + String.join(" | ", shown.subList(Math.max(0, shown.size() - keep), shown.size()));
  }

  /** The most of the log's end read for {@link #lastWords}. */
  private static final int LAST_WORDS_BYTES = 64 * 1024;

  /** A line the server logged of its own, at a level saying something may be wrong. */
  private static final java.util.regex.Pattern SERVER_MESSAGE =
      java.util.regex.Pattern.compile("\\b(LOG|WARNING|ERROR|FATAL|PANIC):");

  /**
   * Stops the server a killed process (SIGKILL, out of memory) left running on {@code data}: the
   * server runs in a session of its own, so it outlives the process that started it, and its pid
   * file would make every later start wait in vain. A pid file naming no live server of this
   * directory is left to PostgreSQL, which starts over a stale one.
   */
  public static void stopLeftRunning(Path data) throws IOException {
    Optional<ProcessHandle> server = serverOf(data);
    if (server.isEmpty()) {
      return;
    }
    long pid = server.get().pid();
    log.warn(
        "An embedded PostgreSQL (pid {}) still runs on {}, left by a process that ended without"
            + " stopping it; stopping it first",
        pid,
        data);
    try {
      // SIGINT: PostgreSQL's fast shutdown, which ends its sessions and checkpoints.
      Process kill =
          new ProcessBuilder("kill", "-INT", Long.toString(pid)).redirectErrorStream(true).start();
      String said = new String(kill.getInputStream().readAllBytes()).strip();
      if (kill.waitFor() != 0) {
        throw new IOException(
            "An embedded PostgreSQL (pid "
                + pid
                + ") still runs on "
                + data
                + " and could not be told to stop ("
                + said
                + "); stop it and start again");
      }
      if (awaitEnd(server.get(), LEFT_RUNNING_STOP)) {
        return;
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IOException("Interrupted while stopping the embedded PostgreSQL left running", e);
    }
    throw new IOException(
        "An embedded PostgreSQL (pid "
            + pid
            + ") still runs on "
            + data
            + " and did not stop within "
            + LEFT_RUNNING_STOP.toSeconds()
            + " s; stop it (kill -INT "
            + pid
            + ") and start again");
  }

  /** How often a wait for a server's end looks. */
  private static final Duration END_POLL = Duration.ofMillis(20);

  /** Waits for the process to end, at most {@code limit}; whether it did. */
  private static boolean awaitEnd(ProcessHandle process, Duration limit)
      throws InterruptedException {
    long deadline = System.nanoTime() + limit.toNanos();
    while (!ended(process)) {
      if (System.nanoTime() - deadline > 0) {
        return false;
      }
      Thread.sleep(END_POLL.toMillis());
    }
    return true;
  }

  /**
   * Whether the process has ended: gone, or exited and not yet reaped. The server is not this
   * process's child (its start tool's, which exits first): its parent is the system's first
   * process, which may take seconds to reap it, and until then Java takes it as alive.
   */
  static boolean ended(ProcessHandle process) {
    if (!process.isAlive()) {
      return true;
    }
    try {
      // Linux: "pid (name) state ...", the name in parentheses possibly holding some itself.
      String stat = Files.readString(Path.of("/proc", Long.toString(process.pid()), "stat"));
      int name = stat.lastIndexOf(')');
      return name >= 0 && name + 2 < stat.length() && stat.charAt(name + 2) == 'Z';
    } catch (IOException e) {
      return !process.isAlive(); // no such file: gone since; elsewhere than Linux: as Java says
    }
  }

  /** The live server whose pid file is in {@code data} and whose command line names it. */
  static Optional<ProcessHandle> serverOf(Path data) throws IOException {
    List<String> lines;
    try {
      lines = Files.readAllLines(data.resolve("postmaster.pid"));
    } catch (NoSuchFileException e) {
      return Optional.empty();
    }
    long pid;
    try {
      pid = lines.isEmpty() ? 0 : Long.parseLong(lines.get(0).trim());
    } catch (NumberFormatException e) {
      return Optional.empty();
    }
    if (pid <= 0) {
      return Optional.empty(); // initdb's bootstrap backend writes its pid negated
    }
    Path dataDir = data.toRealPath();
    return ProcessHandle.of(pid)
        .filter(
            p -> {
              List<String> args = List.of(p.info().arguments().orElse(new String[0]));
              int d = args.indexOf("-D");
              return d >= 0 && d + 1 < args.size() && sameFile(Path.of(args.get(d + 1)), dataDir);
            });
  }

  private static boolean sameFile(Path a, Path b) {
    try {
      return Files.isSameFile(a, b);
    } catch (IOException e) {
      return false;
    }
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

  /**
   * Stops the server and returns once it has exited. The stop's own tool gives a server five
   * seconds (its shutdown may wait on a checkpoint, or on a client slow to go), then gives up while
   * the server goes on stopping; this waits for it, as a server left running outlives this process.
   *
   * @throws IOException when the server has not exited a minute after that
   */
  @Override
  public void close() throws IOException {
    closing = true;
    postgres.close();
    if (process != null && !ended(process)) {
      log.info("Embedded PostgreSQL (pid {}) still stopping; waiting for it", process.pid());
      boolean ended;
      try {
        ended = awaitEnd(process, LEFT_RUNNING_STOP);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IOException("Interrupted while waiting for the embedded PostgreSQL to stop", e);
      }
      if (!ended) {
        throw new IOException(
            "The embedded PostgreSQL (pid "
                + process.pid()
                + ") did not stop within "
                + LEFT_RUNNING_STOP.toSeconds()
                + " s of being asked; "
                + dir.resolve(LOG)
                + " says why, and a start stops it first");
      }
    }
    log.info("Embedded PostgreSQL stopped");
  }
}
