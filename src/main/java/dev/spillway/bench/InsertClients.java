package dev.spillway.bench;

import static java.nio.charset.StandardCharsets.UTF_8;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.LockSupport;
import javax.sql.DataSource;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * pgbench-style single-row inserts: client threads each insert one row per transaction, either in a
 * closed loop as fast as the database takes them or, given a rate, each on a fixed schedule (as
 * {@code pgbench --rate}), and record each insert's latency. On a schedule, latency runs from the
 * insert's scheduled start, so a client that falls behind counts its waiting too.
 *
 * <p>Its {@link #main} runs them as a process of their own for {@link InsertLoad}, so the process
 * being measured never pauses the clients (its garbage collections stop only its own threads).
 */
final class InsertClients {
  /** Where {@link #main} reads the database password from, so it stays out of process listings. */
  static final String PASSWORD_ENV = "SPILLWAY_BENCH_PASSWORD";

  /** How long {@link #main} inserts into a temporary table before its measured clients start. */
  private static final long WARM_UP_MILLIS = 2_000;

  /** What one run saw. */
  record Result(long inserts, double seconds, Samples latencyMicros) {}

  private final DataSource ds;
  private final String setup;
  private final String insert;
  private final int clients;
  private final double rate;
  private final AtomicBoolean running = new AtomicBoolean();
  private final List<Thread> threads = new ArrayList<>();
  private final List<Samples> perClient = new ArrayList<>();
  private volatile String failure;
  private volatile long started;

  /**
   * @param setup run once on each client's connection before its first insert, or null
   * @param insert a statement with one bigint parameter, such as {@code INSERT INTO t (contact_id,
   *     activity) VALUES (?, 'call')}
   * @param rate inserts per second of all clients together, spread evenly; 0 for as fast as the
   *     database takes them
   */
  InsertClients(DataSource ds, String setup, String insert, int clients, double rate) {
    this.ds = ds;
    this.setup = setup;
    this.insert = insert;
    this.clients = clients;
    this.rate = rate;
  }

  /** Starts the clients and returns once each has connected, when their inserts begin together. */
  void start() throws InterruptedException {
    running.set(true);
    CountDownLatch connected = new CountDownLatch(clients);
    CountDownLatch go = new CountDownLatch(1);
    for (int i = 0; i < clients; i++) {
      Samples samples = new Samples();
      perClient.add(samples);
      int client = i;
      Thread t = new Thread(() -> run(client, samples, connected, go), "bench-insert-" + client);
      t.setDaemon(true);
      threads.add(t);
      t.start();
    }
    connected.await();
    started = System.nanoTime();
    go.countDown();
  }

  /** Stops the clients and returns what they saw since they began. */
  Result stop() throws InterruptedException {
    running.set(false);
    for (Thread t : threads) {
      t.join();
    }
    if (failure != null) {
      throw new IllegalStateException("The insert load failed: " + failure);
    }
    double seconds = (System.nanoTime() - started) / 1e9;
    Samples all = new Samples();
    perClient.forEach(samples -> samples.forEach(all::add));
    return new Result(all.size(), seconds, all);
  }

  private void run(int client, Samples samples, CountDownLatch connected, CountDownLatch go) {
    boolean counted = false;
    try (Connection c = ds.getConnection()) {
      c.setAutoCommit(true);
      if (setup != null) {
        try (Statement s = c.createStatement()) {
          s.execute(setup);
        }
      }
      PreparedStatement ps = c.prepareStatement(insert);
      connected.countDown();
      counted = true;
      go.await();
      insertUntilStopped(ps, samples, rate > 0 ? new Pacer(rate, clients, client, started) : null);
    } catch (SQLException e) {
      failure = e.getMessage();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } finally {
      if (!counted) {
        connected.countDown(); // a client that could not connect must not hold the others back
      }
    }
  }

  private void insertUntilStopped(PreparedStatement ps, Samples samples, Pacer pacer)
      throws SQLException {
    try (ps) {
      ThreadLocalRandom random = ThreadLocalRandom.current();
      while (running.get()) {
        long t0 = System.nanoTime();
        if (pacer != null) {
          t0 = pacer.next();
          long wait = t0 - System.nanoTime();
          if (wait > 0) {
            LockSupport.parkNanos(wait);
            continue; // look at running again: the phase may have ended meanwhile
          }
          pacer.advance();
        }
        ps.setLong(1, random.nextLong(1, 100_000));
        ps.executeUpdate();
        samples.add((System.nanoTime() - t0) / 1000);
      }
    }
  }

  /**
   * Runs the clients until a line {@code stop} (or the end of input) arrives on standard input,
   * then prints {@code done <inserts> <seconds> <cpu seconds> <mean> <p50> <p99>}, the latencies in
   * microseconds; prints {@code started} once the clients run.
   *
   * <p>Arguments: JDBC URL, user, clients, rate (0: as fast as they can), insert.
   */
  public static void main(String[] args) throws Exception {
    PGSimpleDataSource ds = new PGSimpleDataSource();
    ds.setURL(args[0]);
    ds.setUser(args[1]);
    ds.setPassword(System.getenv(PASSWORD_ENV));
    int count = Integer.parseInt(args[2]);
    // Unmeasured and unlogged: the measured clients then start on compiled code.
    InsertClients warmUp =
        new InsertClients(
            ds,
            "CREATE TEMPORARY TABLE spillway_bench_warm (contact_id bigint, activity text)",
            "INSERT INTO spillway_bench_warm (contact_id, activity) VALUES (?, 'call')",
            count,
            0);
    warmUp.start();
    Thread.sleep(WARM_UP_MILLIS);
    warmUp.stop();
    InsertClients clients =
        new InsertClients(ds, null, args[4], count, Double.parseDouble(args[3]));
    PrintStream out = System.out;
    double cpuBefore = ProcessCpu.seconds();
    clients.start();
    out.println("started");
    out.flush();
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, UTF_8));
    for (String line = in.readLine(); line != null && !line.equals("stop"); ) {
      line = in.readLine();
    }
    try {
      Result r = clients.stop();
      double cpu = ProcessCpu.seconds() - cpuBefore;
      InsertLoad.Latency l = InsertLoad.Latency.of(r.latencyMicros());
      // Locale.ROOT: InsertLoad parses the numbers back with Long.parseLong and Double.parseDouble.
      out.printf(
          Locale.ROOT,
          "done %d %s %s %s %d %d%n",
          r.inserts(),
          r.seconds(),
          cpu,
          l.mean(),
          l.p50(),
          l.p99());
    } catch (IllegalStateException e) {
      out.println("failed " + e.getMessage());
    }
    out.flush();
  }
}
