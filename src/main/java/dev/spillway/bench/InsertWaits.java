package dev.spillway.bench;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicBoolean;
import javax.sql.DataSource;

/**
 * What the backends running one statement wait on, sampled from {@code pg_stat_activity} every few
 * milliseconds on a connection of its own: per sample, each such active backend counts once under
 * its wait event ({@code IO:WalSync}, {@code LWLock:WALWrite}, …) or, with none, under {@code CPU}
 * (running or waiting to run). The shares say where the statement's time goes.
 */
final class InsertWaits implements AutoCloseable {
  static final String ON_CPU = "CPU";
  static final long EVERY_MILLIS = 5;

  private final DataSource ds;
  private final String statementStart;
  private final AtomicBoolean running = new AtomicBoolean();
  private final Map<String, Long> counts = new TreeMap<>();
  private Thread thread;
  private volatile String failure;

  /**
   * @param statementStart how the sampled statement's text begins
   */
  InsertWaits(DataSource ds, String statementStart) {
    this.ds = ds;
    this.statementStart = statementStart;
  }

  void start() {
    running.set(true);
    thread = new Thread(this::sample, "bench-insert-waits");
    thread.setDaemon(true);
    thread.start();
  }

  /** Stops sampling without waiting for it, as after a phase that failed; stop() reports. */
  @Override
  public void close() {
    running.set(false);
  }

  /** Stops sampling; returns the samples counted under each wait event. */
  Map<String, Long> stop() throws InterruptedException {
    running.set(false);
    thread.join();
    if (failure != null) {
      throw new IllegalStateException("Sampling pg_stat_activity failed: " + failure);
    }
    return Map.copyOf(counts);
  }

  private void sample() {
    String query =
        "SELECT coalesce(wait_event_type || ':' || wait_event, '"
            + ON_CPU
            + "'), count(*) FROM pg_stat_activity"
            + " WHERE state = 'active' AND starts_with(query, ?)"
            + " GROUP BY 1";
    try (Connection c = ds.getConnection();
        PreparedStatement ps = c.prepareStatement(query)) {
      ps.setString(1, statementStart); // the sampled statement's text, as it begins
      while (running.get()) {
        try (ResultSet rs = ps.executeQuery()) {
          while (rs.next()) {
            counts.merge(rs.getString(1), rs.getLong(2), Long::sum);
          }
        }
        Thread.sleep(EVERY_MILLIS);
      }
    } catch (SQLException e) {
      failure = e.getMessage();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
