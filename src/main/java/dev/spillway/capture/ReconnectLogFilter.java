package dev.spillway.capture;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.turbo.TurboFilter;
import ch.qos.logback.core.spi.FilterReply;
import java.io.IOException;
import java.sql.SQLException;
import org.slf4j.LoggerFactory;
import org.slf4j.MDC;
import org.slf4j.Marker;

/**
 * Says in one warning that capture lost its connection to a database and reconnects, where Debezium
 * logs an ERROR with the stack trace and two warnings for what it then retries by itself (a server
 * restart, a failover, a connection ended): the failures its PostgreSQL connector takes for
 * communication failures, an {@link SQLException} or {@link IOException} in the chain. Any other
 * failure of Debezium's is logged as Debezium logs it. Named in {@code logback.xml}.
 */
public final class ReconnectLogFilter extends TurboFilter {
  static final String ERROR_HANDLER = "io.debezium.pipeline.ErrorHandler";
  static final String SOURCE_TASK = "io.debezium.connector.common.BaseSourceTask";

  /** Where Debezium keeps the logical name of the connector a thread works for. */
  private static final String CONNECTOR_NAME = "dbz.connectorLogicalName";

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
      log.warn(
          "Capture of database {} lost its connection to the server ({}); it reconnects, trying every {} s,"
              + " and goes on from the last change it stored.",
          database(),
          rootMessage(t),
          CaptureEngine.RECONNECT_WAIT.toSeconds());
      return FilterReply.DENY;
    }
    // What the warning above says already; only ever logged after a failure Debezium retries.
    if (ERROR_HANDLER.equals(name) && level == Level.WARN && format.startsWith("Retry {} of {}")) {
      return FilterReply.DENY;
    }
    if (SOURCE_TASK.equals(name)
        && level == Level.WARN
        && format.startsWith("Going to restart connector after")) {
      return FilterReply.DENY;
    }
    return FilterReply.NEUTRAL;
  }

  /** Whether Debezium's PostgreSQL connector retries this failure: SQL or I/O in its chain. */
  static boolean communication(Throwable t) {
    for (Throwable c = t; c != null; c = c.getCause() == c ? null : c.getCause()) {
      if (c instanceof SQLException || c instanceof IOException) {
        return true;
      }
    }
    return false;
  }

  /** The failure's message, and its deepest cause's when that says something else. */
  static String rootMessage(Throwable t) {
    Throwable root = t;
    while (root.getCause() != null && root.getCause() != root) {
      root = root.getCause();
    }
    String top = String.valueOf(t.getMessage());
    if (root == t || root.getMessage() == null || top.contains(root.getMessage())) {
      return top;
    }
    return top + ": " + root.getMessage();
  }

  private static String database() {
    String server = MDC.get(CONNECTOR_NAME);
    return server != null && server.startsWith(CaptureEngine.SERVER_NAME_PREFIX)
        ? server.substring(CaptureEngine.SERVER_NAME_PREFIX.length())
        : "(unknown)";
  }
}
