package dev.spillway.bench;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import javax.sql.DataSource;

/**
 * pgbench-style single-row inserts: client threads each insert one row per transaction in a closed
 * loop, as fast as the database takes them, and record each insert's latency.
 */
final class InsertLoad {
  /** What one run saw. */
  record Result(long inserts, double seconds, Samples latencyMicros) {
    double tps() {
      return inserts / seconds;
    }
  }

  private final DataSource ds;
  private final String insert;
  private final int clients;
  private final AtomicBoolean running = new AtomicBoolean();
  private final AtomicLong inserted = new AtomicLong();
  private final List<Thread> threads = new ArrayList<>();
  private final List<Samples> perClient = new ArrayList<>();
  private volatile String failure;
  private long started;

  /**
   * @param insert a statement with one bigint parameter, such as {@code INSERT INTO t (contact_id,
   *     activity) VALUES (?, 'call')}
   */
  InsertLoad(DataSource ds, String insert, int clients) {
    this.ds = ds;
    this.insert = insert;
    this.clients = clients;
  }

  void start() {
    running.set(true);
    started = System.nanoTime();
    for (int i = 0; i < clients; i++) {
      Samples samples = new Samples();
      perClient.add(samples);
      Thread t = new Thread(() -> loop(samples), "bench-insert-" + i);
      t.setDaemon(true);
      threads.add(t);
      t.start();
    }
  }

  /** Rows inserted so far. */
  long inserted() {
    return inserted.get();
  }

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
    perClient.forEach(s -> s.forEach(all::add));
    return new Result(all.size(), seconds, all);
  }

  private void loop(Samples samples) {
    try (Connection c = ds.getConnection();
        PreparedStatement ps = c.prepareStatement(insert)) {
      c.setAutoCommit(true);
      ThreadLocalRandom random = ThreadLocalRandom.current();
      while (running.get()) {
        long t0 = System.nanoTime();
        ps.setLong(1, random.nextLong(1, 100_000));
        ps.executeUpdate();
        samples.add((System.nanoTime() - t0) / 1000);
        inserted.incrementAndGet();
      }
    } catch (SQLException e) {
      failure = e.getMessage();
    }
  }
}
