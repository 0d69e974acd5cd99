package dev.spillway.capture;

import dev.spillway.event.TableName;
import java.sql.SQLException;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Asks for the snapshot of tables other transactions were writing to as capture published them,
 * once those transactions have ended ({@link SourcePreparation.Asked#afterWriters}): their inserts
 * were written before the table was published, so the stream will not carry them, and a snapshot
 * read while they were open would not see them. Looks every {@link #LOOK_EVERY} on a thread of its
 * own; a capture stopping before then leaves those tables unpublished, for the next start to read.
 */
final class ReadAfterWriters implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(ReadAfterWriters.class);
  private static final Duration LOOK_EVERY = Duration.ofMillis(200);

  private final DataSource ds;
  private final String database;
  private final String slot;
  private final Map<TableName, List<String>> pending;
  private final Thread thread;

  private ReadAfterWriters(
      DataSource ds, String database, String slot, Map<TableName, List<String>> afterWriters) {
    this.ds = ds;
    this.database = database;
    this.slot = slot;
    this.pending = new LinkedHashMap<>(afterWriters);
    this.thread = new Thread(this::run, "spillway-capture-read-after-writers-" + database);
    this.thread.setDaemon(true);
  }

  /** Starts waiting for the writers of {@code afterWriters}; null when there are none. */
  static ReadAfterWriters start(
      DataSource ds, String database, String slot, Map<TableName, List<String>> afterWriters) {
    if (afterWriters.isEmpty()) {
      return null;
    }
    log.info(
        "Capture of database {}: reading the rows in {} once the transactions writing to it as"
            + " capture began have ended (incremental snapshot)",
        database,
        names(afterWriters));
    ReadAfterWriters r = new ReadAfterWriters(ds, database, slot, afterWriters);
    r.thread.start();
    return r;
  }

  private void run() {
    boolean warned = false;
    while (!Thread.currentThread().isInterrupted()) {
      try {
        for (TableName t : List.copyOf(pendingTables())) {
          if (!SourcePreparation.running(ds, pending(t))) {
            SourcePreparation.requestSnapshot(ds, database, slot, List.of(t));
            done(t);
            log.info(
                "Capture of database {}: the transactions writing to {} as capture began have"
                    + " ended; reading its rows once (incremental snapshot)",
                database,
                t.displayName());
          }
        }
        if (pendingTables().isEmpty()) {
          return;
        }
      } catch (SQLException | RuntimeException e) {
        if (!warned) {
          log.warn(
              "Capture of database {}: could not look whether the transactions writing to {} have"
                  + " ended ({}); looking again",
              database,
              names(snapshotOfPending()),
              e.getMessage());
          warned = true;
        }
      }
      try {
        Thread.sleep(LOOK_EVERY.toMillis());
      } catch (InterruptedException e) {
        return;
      }
    }
  }

  private synchronized List<TableName> pendingTables() {
    return List.copyOf(pending.keySet());
  }

  private synchronized List<String> pending(TableName t) {
    return pending.get(t);
  }

  private synchronized void done(TableName t) {
    pending.remove(t);
  }

  private synchronized Map<TableName, List<String>> snapshotOfPending() {
    return Map.copyOf(pending);
  }

  private static String names(Map<TableName, List<String>> tables) {
    return tables.keySet().stream().map(TableName::displayName).collect(Collectors.joining(", "));
  }

  /** Stops waiting, before the engine stops: what is still waited for is then {@link #leave}. */
  void stop() {
    thread.interrupt();
    try {
      thread.join(5_000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /**
   * Takes the tables still waited for out of the publication, once the engine has stopped: the next
   * start finds them unpublished and reads their rows once, those the transactions commit meanwhile
   * included, as it does for any table joining capture.
   */
  void leave() {
    Map<TableName, List<String>> left = snapshotOfPending();
    if (left.isEmpty()) {
      return;
    }
    try {
      SourcePreparation.unpublish(ds, slot, List.copyOf(left.keySet()));
      log.warn(
          "Capture of database {} stops before the transactions writing to {} as it began have"
              + " ended: the next start reads their rows once",
          database,
          names(left));
    } catch (SQLException e) {
      log.warn(
          "Capture of database {} stops before the transactions writing to {} as it began have"
              + " ended, and could not take them out of its publication ({}): once they have"
              + " ended, run 'bin/spillway buffers reread' for those tables' buffers",
          database,
          names(left),
          e.getMessage());
    }
  }

  @Override
  public void close() {
    stop();
    leave();
  }
}
