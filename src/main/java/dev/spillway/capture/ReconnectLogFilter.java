package dev.spillway.capture;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.turbo.TurboFilter;
import ch.qos.logback.core.spi.FilterReply;
import dev.spillway.support.Causes;
import java.io.IOException;
import java.sql.SQLException;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.LongSupplier;
import java.util.regex.Pattern;
import org.slf4j.LoggerFactory;
import org.slf4j.MDC;
import org.slf4j.Marker;

/**
 * Says in one warning that capture lost its connection to a database and reconnects, where Debezium
 * logs an ERROR with the stack trace and two warnings for what it then retries by itself (a server
 * restart, a failover, a connection ended): a failure with an {@link IOException} in its chain, or
 * an {@link SQLException} of a lost connection or a server shutting down. Debezium retries every
 * SQL failure, but any other (a permission taken away, a publication dropped) will not go away by
 * itself and is logged as Debezium logs it. Later attempts during an outage keep Debezium's
 * warning; getting back is said in a line of Spillway's.
 *
 * <p>Debezium's warning with a stack trace at each attempt to stream from a slot the server still
 * holds for another stream (a stream Debezium itself just ended, whose WAL sender has not exited
 * yet) becomes a line of Spillway's at the first attempt and one every 10 s after. Named in {@code
 * logback.xml}.
 *
 * <p>Debezium's other ERRORs with a stack trace when a connection is lost are dropped: closing the
 * dead connections failing, and its heartbeat's query failing, which becomes a line of Spillway's
 * once a minute at most unless the database's loss is being said.
 */
public final class ReconnectLogFilter extends TurboFilter {
  static final String ERROR_HANDLER = "io.debezium.pipeline.ErrorHandler";
  static final String SOURCE_TASK = "io.debezium.connector.common.BaseSourceTask";
  static final String REPLICATION_CONNECTION =
      "io.debezium.connector.postgresql.connection.PostgresReplicationConnection";
  static final String HEARTBEAT = "io.debezium.heartbeat.DatabaseHeartbeatImpl";
  static final String THREADS = "io.debezium.util.Threads";

  /** Debezium's warning at each attempt on a slot held for another stream. */
  static final String SLOT_BUSY = "Failed to start replication stream at ";

  /** SQLSTATE of an object in use: a slot another WAL sender streams from. */
  private static final String SLOT_IN_USE = "55006";

  /** What Debezium looks for in the failure to try again. */
  private static final Pattern SLOT_ACTIVE = Pattern.compile("replication slot .* is active");

  /** How often, at most, attempts on a slot held for another stream are said. */
  private static final long SLOT_BUSY_SAID_EVERY_MILLIS = 10_000;

  /** How long after a replaced failure Debezium's restart warning is taken for its echo. */
  private static final long ECHO_NANOS = 2_000_000_000L;

  /**
   * How long a lost connection, once said, is not said again while capture has not reconnected:
   * Debezium may fail twice for one loss; a longer outage is said again after this.
   */
  private static final long REPEAT_NANOS = 60_000_000_000L;

  /** SQLSTATEs of a lost connection: class 08, and the server shutting down or restarting. */
  private static final Set<String> SHUTDOWN = Set.of("57P01", "57P02", "57P03");

  /** Per database whose lost connection was announced and not yet regained: when. */
  private final Map<String, Long> lost = new ConcurrentHashMap<>();

  /** Per database, when a heartbeat lost its connection was last said. */
  private final Map<String, Long> heartbeatSaid = new ConcurrentHashMap<>();

  /** Per database, when capture last failed for a lost connection, said or not. */
  private final Map<String, Long> failed = new ConcurrentHashMap<>();

  private final LongSupplier nanos;

  /** As logback makes it. */
  public ReconnectLogFilter() {
    this(System::nanoTime);
  }

  /**
   * @param nanos the time, on {@link System#nanoTime()}'s scale
   */
  ReconnectLogFilter(LongSupplier nanos) {
    this.nanos = nanos;
  }

  /** Where Debezium keeps the logical name of the connector a thread works for. */
  private static final String CONNECTOR_NAME = "dbz.connectorLogicalName";

  /** Where Kafka Connect keeps the name of the connector a thread works for. */
  private static final String CONNECT_CONTEXT = "connector.context";

  private static final org.slf4j.Logger log = LoggerFactory.getLogger(Capture.class);

  @Override
  public FilterReply decide(
      Marker marker, Logger logger, Level level, String format, Object[] params, Throwable t) {
    if (format == null) {
      return FilterReply.NEUTRAL;
    }
    String name = logger.getName();
    if (ERROR_HANDLER.equals(name) && level == Level.ERROR && format.equals("Producer failure")) {
      if (!communication(t)) {
        return FilterReply.NEUTRAL;
      }
      String database = database();
      failed.put(database, nanos.getAsLong());
      Long said = lost.get(database);
      if (said != null && nanos.getAsLong() - said < REPEAT_NANOS) {
        return FilterReply.DENY; // the same outage, said a moment ago
      }
      log.warn(
          "Capture of database {} lost its connection to the server ({}); it reconnects, trying"
              + " every {} s, and goes on from the last change it stored.",
          database,
          rootMessage(t),
          CaptureEngine.RECONNECT_WAIT.toSeconds());
      lost.put(database, nanos.getAsLong());
      return FilterReply.DENY;
    }
    if (level == Level.ERROR && heartbeatFailed(name, format)) {
      return heartbeat(thrown(params, t));
    }
    if (level == Level.ERROR && closingFailed(name, format, params)) {
      return communication(thrown(params, t)) ? FilterReply.DENY : FilterReply.NEUTRAL;
    }
    if (REPLICATION_CONNECTION.equals(name)
        && level == Level.WARN
        && format.startsWith(SLOT_BUSY)) {
      return slotBusy(params);
    }
    // Debezium's two warnings after a failure: what the warning above said, when just replaced.
    boolean echo =
        (ERROR_HANDLER.equals(name) && format.startsWith("Retry {} of {}"))
            || (SOURCE_TASK.equals(name) && format.startsWith("Going to restart connector after"));
    if (echo && level == Level.WARN) {
      Long at = lost.containsKey(database()) ? failed.get(database()) : null;
      return at != null && nanos.getAsLong() - at < ECHO_NANOS
          ? FilterReply.DENY
          : FilterReply.NEUTRAL;
    }
    if (SOURCE_TASK.equals(name) && format.equals("Successfully restarted task")) {
      String database = database();
      if (lost.remove(database) != null) {
        log.info("Capture of database {} reconnected.", database);
      }
    }
    return FilterReply.NEUTRAL;
  }

  private static boolean heartbeatFailed(String logger, String format) {
    return HEARTBEAT.equals(logger) && format.startsWith("Could not execute heartbeat action");
  }

  /** Debezium's ERROR as it closes a connection, or its heartbeat's, that failed. */
  private static boolean closingFailed(String logger, String format, Object[] params) {
    return HEARTBEAT.equals(logger) && format.startsWith("Exception while closing")
        || REPLICATION_CONNECTION.equals(logger)
            && format.startsWith("Unexpected error while closing")
        || THREADS.equals(logger)
            && format.equals("Operation {} failed")
            && params != null
            && params.length > 0
            && String.valueOf(params[0]).endsWith("-close");
  }

  /**
   * The heartbeat's query failing for a lost connection: nothing while a loss of this database is
   * said, else a line of Spillway's, once a minute at most, so a heartbeat connection cut again and
   * again while the stream goes on is still seen (it opens again at the next beat). Any other
   * failure is left as Debezium logs it.
   */
  private FilterReply heartbeat(Throwable failure) {
    if (!communication(failure)) {
      return FilterReply.NEUTRAL;
    }
    String database = database();
    long now = nanos.getAsLong();
    Long said = heartbeatSaid.get(database);
    if (!lost.containsKey(database) && (said == null || now - said >= REPEAT_NANOS)) {
      heartbeatSaid.put(database, now);
      log.warn(
          "Capture of database {} could not run its heartbeat query ({}); it tries again at the"
              + " next heartbeat.",
          database,
          rootMessage(failure));
    }
    return FilterReply.DENY;
  }

  /** The line's throwable: given apart, or as its last argument, as SLF4J takes it. */
  private static Throwable thrown(Object[] params, Throwable t) {
    if (t != null) {
      return t;
    }
    return params != null
            && params.length > 0
            && params[params.length - 1] instanceof Throwable last
        ? last
        : null;
  }

  /**
   * Says Debezium's attempt on a slot the server holds for another stream in a line of its own: at
   * the first attempt, and every 10 s after. Its arguments: the wait in ms, the attempt, the most
   * attempts, the failure.
   */
  private FilterReply slotBusy(Object[] params) {
    if (params == null
        || params.length < 4
        || !(params[0] instanceof Long waitMillis)
        || !(params[1] instanceof Integer attempt)
        || !(params[2] instanceof Integer most)
        || !(params[3] instanceof Throwable busy)
        || !slotHeld(busy)) {
      return FilterReply.NEUTRAL; // another failure, which Debezium retries the same way: kept
    }
    long every = Math.max(1, SLOT_BUSY_SAID_EVERY_MILLIS / Math.max(1, waitMillis));
    if (attempt == 1) {
      log.info(
          "Capture of database {} finds its slot still held ({}), as for a moment after it ends a"
              + " stream to start another; it asks again every {} ms, {} times at most.",
          database(),
          rootMessage(busy),
          waitMillis,
          most);
    } else if ((attempt - 1) % every == 0) {
      log.warn(
          "Capture of database {} finds its slot still held after {} ms ({}); it asks again"
              + " every {} ms, {} times at most.",
          database(),
          (attempt - 1) * waitMillis,
          rootMessage(busy),
          waitMillis,
          most);
    }
    return FilterReply.DENY;
  }

  /**
   * Forgets, in the filters logback runs, a loss said of this database's capture by an engine that
   * ended before reconnecting: a new engine's first loss is said.
   */
  static void captureStarts(String database) {
    if (LoggerFactory.getILoggerFactory() instanceof LoggerContext context) {
      for (TurboFilter f : context.getTurboFilterList()) {
        if (f instanceof ReconnectLogFilter r) {
          r.forget(database);
        }
      }
    }
  }

  void forget(String database) {
    lost.remove(database);
    failed.remove(database);
    heartbeatSaid.remove(database);
  }

  /**
   * Whether the failure is the server refusing a slot it holds for another stream: SQLSTATE 55006
   * (object in use), or Debezium's words for it, in its chain.
   */
  static boolean slotHeld(Throwable t) {
    return Causes.first(
            t,
            c ->
                c instanceof SQLException e && SLOT_IN_USE.equals(e.getSQLState())
                    || c.getMessage() != null && SLOT_ACTIVE.matcher(c.getMessage()).find())
        .isPresent();
  }

  /** Whether the failure is a lost connection: I/O, or SQL saying so, in its chain. */
  static boolean communication(Throwable t) {
    return Causes.first(
            t,
            c ->
                c instanceof IOException
                    || c instanceof SQLException e
                        && e.getSQLState() != null
                        && (e.getSQLState().startsWith("08") || SHUTDOWN.contains(e.getSQLState())))
        .isPresent();
  }

  /** The failure's message, and its deepest cause's when that says something else. */
  static String rootMessage(Throwable t) {
    Throwable root = Causes.root(t);
    String top = String.valueOf(t.getMessage());
    if (root == t || root.getMessage() == null || top.contains(root.getMessage())) {
      return top;
    }
    return top + ": " + root.getMessage();
  }

  /**
   * The database whose capture logs: from Debezium's logical name, or, on the engine's threads,
   * which Debezium leaves without it, from Kafka Connect's context, {@code [engine-name|task-1]}.
   */
  private static String database() {
    String server = MDC.get(CONNECTOR_NAME);
    if (server != null && server.startsWith(CaptureEngine.SERVER_NAME_PREFIX)) {
      return server.substring(CaptureEngine.SERVER_NAME_PREFIX.length());
    }
    String context = MDC.get(CONNECT_CONTEXT);
    String start = "[" + CaptureEngine.ENGINE_NAME_PREFIX;
    if (context != null && context.startsWith(start) && context.indexOf('|') > start.length()) {
      return context.substring(start.length(), context.indexOf('|'));
    }
    return "(unknown)";
  }
}
