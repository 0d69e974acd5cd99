package dev.spillway.bench;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicBoolean;
import javax.sql.DataSource;

/**
 * The source document's own design, for comparison: claim jobs that give up to {@code batchSize}
 * unclaimed rows a group id ({@code SELECT … FOR UPDATE SKIP LOCKED}, then one {@code UPDATE}), and
 * an events job per group that runs the (no-op) bulk operation and deletes the group. Claimers loop
 * at once while they find full batches and wait {@code idle} when they find fewer. Records each
 * row's insert → delete latency.
 */
final class SkipLockedPoller {
  private final DataSource ds;
  private final String table;
  private final int batchSize;
  private final int claimers;
  private final long idleMillis;
  private final int timeoutSeconds;
  private final AtomicBoolean running = new AtomicBoolean();
  private final List<Thread> threads = new ArrayList<>();
  private final Samples latencyMicros = new Samples();
  private volatile String failure;

  /**
   * @param table quoted; has {@code id}, {@code group_id uuid} and {@code created_at timestamptz}
   * @param timeoutSeconds the longest one statement may run before the poller fails
   */
  SkipLockedPoller(
      DataSource ds,
      String table,
      int batchSize,
      int claimers,
      long idleMillis,
      int timeoutSeconds) {
    this.ds = ds;
    this.table = table;
    this.batchSize = batchSize;
    this.claimers = claimers;
    this.idleMillis = idleMillis;
    this.timeoutSeconds = timeoutSeconds;
  }

  void start() {
    running.set(true);
    for (int i = 0; i < claimers; i++) {
      Thread t = new Thread(this::loop, "bench-poller-" + i);
      t.setDaemon(true);
      threads.add(t);
      t.start();
    }
  }

  /** Stops after the current group; returns every row's insert → delete latency. */
  Samples stop() throws InterruptedException {
    running.set(false);
    for (Thread t : threads) {
      t.join();
    }
    if (failure != null) {
      throw new IllegalStateException("The SKIP LOCKED poller failed: " + failure);
    }
    synchronized (latencyMicros) {
      return latencyMicros;
    }
  }

  private void loop() {
    // The document's claim, as it writes it: in one transaction, lock up to batchSize unclaimed
    // ids (SKIP LOCKED), then give those ids the group id. A single "UPDATE … WHERE id IN (SELECT
    // … SKIP LOCKED)" leaves the planner free to run the locking scan again within a claim; in
    // one run at 5,000 inserts/s four such claims stayed busy for over seven minutes.
    String lock =
        "SELECT id FROM " + table + " WHERE group_id IS NULL LIMIT ? FOR UPDATE SKIP LOCKED";
    String claim = "UPDATE " + table + " SET group_id = ? WHERE id = ANY (?)";
    String delete =
        "DELETE FROM "
            + table
            + " WHERE group_id = ?"
            + " RETURNING (extract(epoch FROM created_at) * 1000000)::bigint";
    try (Connection c = ds.getConnection();
        PreparedStatement lockIds = c.prepareStatement(lock);
        PreparedStatement claimIds = c.prepareStatement(claim);
        PreparedStatement deleteGroup = c.prepareStatement(delete)) {
      c.setAutoCommit(false);
      // A statement that never returns would hang the benchmark, whose stop waits for the claimers.
      for (PreparedStatement s : List.of(lockIds, claimIds, deleteGroup)) {
        s.setQueryTimeout(timeoutSeconds);
      }
      while (running.get()) {
        UUID group = UUID.randomUUID();
        int claimed = claim(c, lockIds, claimIds, group);
        if (claimed > 0) {
          // The events job: the bulk operation is a no-op here, then the group is deleted.
          deleteGroup.setObject(1, group); // the group just claimed
          List<Long> insertedAt = new ArrayList<>(claimed);
          try (ResultSet rs = deleteGroup.executeQuery()) {
            while (rs.next()) {
              insertedAt.add(rs.getLong(1));
            }
          }
          c.commit();
          // Handled once the delete commits, as Spillway's rows are: timed after the commit (the
          // database's clock and this one are the machine's).
          long now = ChronoUnit.MICROS.between(Instant.EPOCH, Instant.now());
          synchronized (latencyMicros) {
            insertedAt.forEach(at -> latencyMicros.add(now - at));
          }
        }
        if (claimed < batchSize) {
          Thread.sleep(idleMillis);
        }
      }
    } catch (SQLException e) {
      failure = e.getMessage();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** Gives up to batchSize unclaimed rows the group id and commits; returns how many it gave. */
  private int claim(Connection c, PreparedStatement lockIds, PreparedStatement claimIds, UUID group)
      throws SQLException {
    List<Long> ids = new ArrayList<>(batchSize);
    lockIds.setInt(1, batchSize); // the most rows one group takes
    try (ResultSet rs = lockIds.executeQuery()) {
      while (rs.next()) {
        ids.add(rs.getLong(1));
      }
    }
    if (!ids.isEmpty()) {
      claimIds.setObject(1, group); // the new group id
      claimIds.setArray(2, c.createArrayOf("bigint", ids.toArray())); // the ids just locked
      claimIds.executeUpdate();
    }
    c.commit();
    return ids.size();
  }
}
