package dev.spillway.runtime;

import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.filter.Filter;
import ch.qos.logback.core.spi.FilterReply;
import java.util.List;

/**
 * Drops the warnings Kafka and HikariCP log while nothing is wrong; every other warning of the same
 * loggers passes. Named in {@code logback.xml}.
 */
public final class BenignWarningFilter extends Filter<ILoggingEvent> {
  static final String CONTROLLER = "org.apache.kafka.controller.QuorumController";
  static final String SENDER = "org.apache.kafka.clients.producer.internals.Sender";
  static final String POOL = "com.zaxxer.hikari.pool.PoolBase";

  /** A logger and words of the one message of it that is dropped. */
  private record Benign(String logger, String words) {
    boolean matches(ILoggingEvent event) {
      String message = event.getFormattedMessage();
      return logger.equals(event.getLoggerName()) && message != null && message.contains(words);
    }
  }

  private static final List<Benign> BENIGN =
      List.of(
          // The embedded broker's controller, on every start.
          new Benign(CONTROLLER, "Performing controller activation"),
          // A Streams producer starting its next transaction while the broker still completes the
          // last commit: retried until it is, and a failure would be an error of its own.
          new Benign(SENDER, "Error: CONCURRENT_TRANSACTIONS"),
          // The pool finding a connection the server ended (a restart, a failover) and opening
          // another, once per pooled connection, with advice about maxLifetime that does not apply.
          // Its failing to open one is logged, and the health monitor says STOP. A connection that
          // did not answer in time (a network dropping it) is still shown.
          new Benign(POOL, "(This connection has been closed.)"));

  @Override
  public FilterReply decide(ILoggingEvent event) {
    return BENIGN.stream().anyMatch(b -> b.matches(event)) ? FilterReply.DENY : FilterReply.NEUTRAL;
  }
}
