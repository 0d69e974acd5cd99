package dev.spillway.capture;

import dev.spillway.event.TableName;
import java.sql.SQLException;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArraySet;
import java.util.stream.Collectors;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Joins to the publication, on a thread of its own, the tables a start left out because it could
 * not lock them against writes in time ({@link SourcePreparation.Asked#later}): a transaction
 * writing to one then may hold rows written before the table was published, which the stream would
 * never carry. Each is tried every {@link #TRY_EVERY} until {@link SourcePreparation#join} can lock
 * it (waiting a tenth of a second at most each time), which publishes it and asks for its snapshot
 * in one transaction; rows inserted meanwhile wait in the table and are read then. A capture
 * stopping first leaves them unpublished, for the next start.
 */
final class LateJoins implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(LateJoins.class);
  private static final Duration TRY_EVERY = Duration.ofSeconds(1);

  private final DataSource ds;
  private final String database;
  private final String slot;
  private final Set<TableName> waiting;
  private final Thread thread;

  private LateJoins(DataSource ds, String database, String slot, List<TableName> later) {
    this.ds = ds;
    this.database = database;
    this.slot = slot;
    this.waiting = new CopyOnWriteArraySet<>(later);
    this.thread = new Thread(this::run, "spillway-capture-join-" + database);
    this.thread.setDaemon(true);
  }

  /** Starts joining {@code later}; null when there is none. */
  static LateJoins start(DataSource ds, String database, String slot, List<TableName> later) {
    if (later.isEmpty()) {
      return null;
    }
    log.warn(
        "Capture of database {}: {} could not be locked against writes within the start's wait (a"
            + " transaction writing to it?); it joins capture once it can be, its rows then read"
            + " once (incremental snapshot)",
        database,
        names(later));
    LateJoins r = new LateJoins(ds, database, slot, later);
    r.thread.start();
    return r;
  }

  /** The tables not joined yet: capture does not read them yet, though they are configured. */
  Set<TableName> waiting() {
    return Set.copyOf(waiting);
  }

  private void run() {
    Set<TableName> warned = new HashSet<>();
    while (!waiting.isEmpty() && !Thread.currentThread().isInterrupted()) {
      for (TableName t : waiting) {
        try {
          if (SourcePreparation.join(ds, slot, t)) {
            waiting.remove(t);
            log.info(
                "Capture of database {}: {} joined capture; reading its rows once (incremental"
                    + " snapshot)",
                database,
                t.displayName());
          }
        } catch (SQLException | RuntimeException e) {
          if (gone(t)) {
            // No longer waited for: the slot checks say it left, as of any table dropped.
            waiting.remove(t);
          } else if (warned.add(t)) {
            log.warn(
                "Capture of database {} could not join {} ({}); trying again",
                database,
                t.displayName(),
                e.getMessage());
          }
        }
      }
      try {
        Thread.sleep(TRY_EVERY.toMillis());
      } catch (InterruptedException e) {
        return;
      }
    }
  }

  private boolean gone(TableName t) {
    try {
      return !SourcePreparation.exists(ds, t);
    } catch (SQLException e) {
      return false;
    }
  }

  private static String names(List<TableName> tables) {
    return tables.stream().map(TableName::displayName).collect(Collectors.joining(", "));
  }

  /** Stops trying; tables not joined yet stay unpublished, and the next start joins them. */
  @Override
  public void close() {
    thread.interrupt();
    try {
      thread.join(5_000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
