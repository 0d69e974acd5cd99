package dev.spillway.bench;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicBoolean;
import javax.sql.DataSource;

/**
 * A pgbench-like foreground load: client threads each run a short transaction (read one account,
 * update another) in a closed loop and record its latency. Run it alone for a baseline, then while
 * a pipeline works, and compare.
 */
public final class ForegroundProbe {
  /** What one probe run saw. */
  public record Result(long transactions, double seconds, Samples latencyMicros) {
    public double tps() {
      return transactions / seconds;
    }
  }

  private static final String TABLE = "public.bench_probe_accounts";
  private final DataSource ds;
  private final int clients;
  private final int accounts;
  private final AtomicBoolean running = new AtomicBoolean();
  private final List<Thread> threads = new ArrayList<>();
  private final List<Samples> perClient = new ArrayList<>();
  private volatile String failure;
  private long started;

  public ForegroundProbe(DataSource ds, int clients, int accounts) {
    this.ds = ds;
    this.clients = clients;
    this.accounts = accounts;
  }

  /** Creates the probe's own table, separate from what pipelines touch. */
  public void prepare() throws SQLException {
    try (Connection c = ds.getConnection();
        Statement s = c.createStatement()) {
      s.execute("DROP TABLE IF EXISTS " + TABLE);
      s.execute("CREATE TABLE " + TABLE + " (id int PRIMARY KEY, balance bigint NOT NULL)");
      s.execute(
          "INSERT INTO " + TABLE + " SELECT g, 0 FROM generate_series(1, " + accounts + ") g");
      s.execute("VACUUM ANALYZE " + TABLE);
    }
  }

  public void start() {
    running.set(true);
    threads.clear();
    perClient.clear();
    failure = null;
    started = System.nanoTime();
    for (int i = 0; i < clients; i++) {
      Samples samples = new Samples();
      perClient.add(samples);
      Thread t = new Thread(() -> loop(samples), "bench-probe-" + i);
      t.setDaemon(true);
      threads.add(t);
      t.start();
    }
  }

  /**
   * Stops the clients and returns what they saw.
   *
   * @throws IllegalStateException naming the failure when a client failed: its transactions stopped
   *     then, and a result without them would read as the pipeline's doing
   */
  public Result stop() throws InterruptedException {
    running.set(false);
    for (Thread t : threads) {
      t.join();
    }
    if (failure != null) {
      throw new IllegalStateException("The foreground probe failed: " + failure);
    }
    double seconds = (System.nanoTime() - started) / 1e9;
    Samples all = new Samples();
    long count = 0;
    for (Samples s : perClient) {
      count += s.size();
      s.forEach(all::add);
    }
    return new Result(count, seconds, all);
  }

  private void loop(Samples samples) {
    try (Connection c = ds.getConnection();
        PreparedStatement read =
            c.prepareStatement("SELECT balance FROM " + TABLE + " WHERE id = ?");
        PreparedStatement write =
            c.prepareStatement("UPDATE " + TABLE + " SET balance = balance + 1 WHERE id = ?")) {
      c.setAutoCommit(false);
      ThreadLocalRandom random = ThreadLocalRandom.current();
      while (running.get()) {
        long t0 = System.nanoTime();
        read.setInt(1, 1 + random.nextInt(accounts));
        try (ResultSet rs = read.executeQuery()) {
          rs.next();
        }
        write.setInt(1, 1 + random.nextInt(accounts));
        write.executeUpdate();
        c.commit();
        samples.add((System.nanoTime() - t0) / 1000);
      }
    } catch (SQLException e) {
      failure = e.getMessage();
    }
  }
}
