package dev.spillway.capture;

import static org.assertj.core.api.Assertions.assertThat;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import ch.qos.logback.core.spi.FilterReply;
import java.io.EOFException;
import java.sql.SQLException;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;
import org.slf4j.MDC;

class ReconnectLogFilterTest {
  private final AtomicLong nanos = new AtomicLong(1_000_000_000L);
  private final ReconnectLogFilter filter = new ReconnectLogFilter(nanos::get);
  private final LoggerContext context = new LoggerContext();

  private FilterReply decide(String logger, Level level, String format, Throwable t) {
    Logger l = context.getLogger(logger);
    return filter.decide(null, l, level, format, null, t);
  }

  /** What Spillway's capture logs while {@code steps} run, MDC cleared after. */
  private static List<String> said(Runnable steps) {
    Logger capture = (Logger) LoggerFactory.getLogger(Capture.class);
    ListAppender<ILoggingEvent> said = new ListAppender<>();
    said.start();
    capture.addAppender(said);
    try {
      steps.run();
    } finally {
      MDC.clear();
      capture.detachAppender(said);
    }
    return said.list.stream().map(ILoggingEvent::getFormattedMessage).toList();
  }

  /** Debezium's ERROR for a failure of its task. */
  private FilterReply producerFailure(Throwable failure) {
    return decide(ReconnectLogFilter.ERROR_HANDLER, Level.ERROR, "Producer failure", failure);
  }

  /** Kafka Connect's line once the task runs again. */
  private FilterReply restarted() {
    return decide(ReconnectLogFilter.SOURCE_TASK, Level.INFO, "Successfully restarted task", null);
  }

  /** Debezium's warning as it goes to restart after a failure it retries. */
  private FilterReply restartWarning() {
    return decide(
        ReconnectLogFilter.SOURCE_TASK,
        Level.WARN,
        "Going to restart connector after {} sec. after a retriable exception",
        null);
  }

  @Test
  void should_replace_debeziums_error_for_a_failure_it_retries_and_keep_any_other() {
    SQLException lost = new SQLException("Database connection failed when reading from copy");
    lost.initCause(new EOFException());
    assertThat(producerFailure(new RuntimeException("wrapped", lost))).isEqualTo(FilterReply.DENY);
    assertThat(
            producerFailure(
                new IllegalStateException("The connector is trying to read change stream")))
        .as("a failure Debezium does not retry")
        .isEqualTo(FilterReply.NEUTRAL);
    assertThat(producerFailure(null)).isEqualTo(FilterReply.NEUTRAL);
    assertThat(producerFailure(new SQLException("permission denied for table projects", "42501")))
        .as("an SQL failure Debezium retries for ever, though it will not go away")
        .isEqualTo(FilterReply.NEUTRAL);
    for (String state : new String[] {"08006", "57P01"}) {
      assertThat(producerFailure(new RuntimeException("wrapped", new SQLException("gone", state))))
          .as(state)
          .isEqualTo(FilterReply.DENY);
    }
    assertThat(
            decide(
                ReconnectLogFilter.ERROR_HANDLER,
                Level.WARN,
                "Retry {} of {} retries will be attempted",
                null))
        .isEqualTo(FilterReply.DENY);
    assertThat(restartWarning()).isEqualTo(FilterReply.DENY);
    assertThat(
            decide(
                ReconnectLogFilter.ERROR_HANDLER,
                Level.ERROR,
                "The maximum number of {} retries has been attempted",
                null))
        .isEqualTo(FilterReply.NEUTRAL);
    assertThat(decide("io.debezium.Other", Level.ERROR, "Producer failure", lost))
        .as("the same words from another logger")
        .isEqualTo(FilterReply.NEUTRAL);
  }

  private FilterReply debeziumError(String logger, String format, Object... params) {
    return filter.decide(null, context.getLogger(logger), Level.ERROR, format, params, null);
  }

  @Test
  void should_drop_debeziums_closing_errors_of_a_lost_connection_and_say_its_heartbeats_briefly() {
    SQLException refused = new SQLException("Connection to localhost:5432 refused", "08001");
    SQLException broken = new SQLException("An I/O error occurred while sending to the backend");
    broken.initCause(new EOFException());
    String heartbeat = "Could not execute heartbeat action (Error: {})";
    List<String> lines =
        said(
            () -> {
              MDC.put("dbz.connectorLogicalName", "spillway-main");
              // The heartbeat's own connection cut while the stream goes on: said once a minute.
              assertThat(debeziumError(ReconnectLogFilter.HEARTBEAT, heartbeat, "08006", broken))
                  .isEqualTo(FilterReply.DENY);
              nanos.addAndGet(10_000_000_000L);
              assertThat(debeziumError(ReconnectLogFilter.HEARTBEAT, heartbeat, "08006", broken))
                  .isEqualTo(FilterReply.DENY);
              nanos.addAndGet(60_000_000_000L);
              assertThat(debeziumError(ReconnectLogFilter.HEARTBEAT, heartbeat, "08001", refused))
                  .isEqualTo(FilterReply.DENY);
              // The database gone: its loss is said, and the heartbeats not beside it.
              producerFailure(new SQLException("gone", "08006"));
              nanos.addAndGet(60_000_000_000L);
              assertThat(debeziumError(ReconnectLogFilter.HEARTBEAT, heartbeat, "08001", refused))
                  .isEqualTo(FilterReply.DENY);
            });
    assertThat(lines)
        .containsExactly(
            "Capture of database main could not run its heartbeat query (An I/O error occurred"
                + " while sending to the backend); it tries again at the next heartbeat.",
            "Capture of database main could not run its heartbeat query (Connection to"
                + " localhost:5432 refused); it tries again at the next heartbeat.",
            "Capture of database main lost its connection to the server (gone); it reconnects,"
                + " trying every 10 s, and goes on from the last change it stored.");
    assertThat(
            debeziumError(
                ReconnectLogFilter.HEARTBEAT,
                heartbeat,
                "42501",
                new SQLException("permission denied for table spillway_heartbeat", "42501")))
        .as("a heartbeat that fails for a reason that stays")
        .isEqualTo(FilterReply.NEUTRAL);
    assertThat(
            debeziumError(
                ReconnectLogFilter.THREADS, "Operation {} failed", "jdbc-connection-close", broken))
        .isEqualTo(FilterReply.DENY);
    assertThat(
            debeziumError(
                ReconnectLogFilter.THREADS, "Operation {} failed", "snapshot-read", broken))
        .as("another operation of Debezium's")
        .isEqualTo(FilterReply.NEUTRAL);
    assertThat(
            decide(
                ReconnectLogFilter.REPLICATION_CONNECTION,
                Level.ERROR,
                "Unexpected error while closing Postgres connection",
                broken))
        .isEqualTo(FilterReply.DENY);
    assertThat(
            decide(
                ReconnectLogFilter.REPLICATION_CONNECTION,
                Level.ERROR,
                "Unexpected error while closing Postgres connection",
                new IllegalStateException("decoder")))
        .isEqualTo(FilterReply.NEUTRAL);
    assertThat(debeziumError("io.debezium.Other", heartbeat, "08001", refused))
        .as("the same words from another logger")
        .isEqualTo(FilterReply.NEUTRAL);
  }

  /** Debezium's warning at attempt {@code attempt} of 60, a second apart, failing so. */
  private FilterReply slotAttempt(int attempt, SQLException failure) {
    return slotBusyWarning(
        "LSN{0/2D0854E8}, waiting for {} ms and retrying, attempt number {} over {}",
        1000L,
        attempt,
        60,
        failure);
  }

  /** The same, on a slot the server holds for another PID. */
  private FilterReply slotBusy(int attempt) {
    return slotAttempt(
        attempt,
        new SQLException(
            "ERROR: replication slot \"spillway_main\" is active for PID 8857", "55006"));
  }

  private FilterReply slotBusyWarning(String rest, Object... params) {
    Logger l = context.getLogger(ReconnectLogFilter.REPLICATION_CONNECTION);
    return filter.decide(null, l, Level.WARN, ReconnectLogFilter.SLOT_BUSY + rest, params, null);
  }

  @Test
  void should_say_a_slot_held_for_another_stream_at_the_first_attempt_and_every_10_s() {
    List<String> lines =
        said(
            () -> {
              MDC.put("dbz.connectorLogicalName", "spillway-main");
              for (int attempt = 1; attempt <= 21; attempt++) {
                assertThat(slotBusy(attempt)).as("attempt %d", attempt).isEqualTo(FilterReply.DENY);
              }
            });
    assertThat(lines)
        .containsExactly(
            "Capture of database main finds its slot still held (ERROR: replication slot"
                + " \"spillway_main\" is active for PID 8857), as for a moment after it ends a"
                + " stream to start another; it asks again every 1000 ms, 60 times at most.",
            "Capture of database main finds its slot still held after 10000 ms (ERROR: replication"
                + " slot \"spillway_main\" is active for PID 8857); it asks again every 1000 ms, 60"
                + " times at most.",
            "Capture of database main finds its slot still held after 20000 ms (ERROR: replication"
                + " slot \"spillway_main\" is active for PID 8857); it asks again every 1000 ms, 60"
                + " times at most.");
    assertThat(
            slotAttempt(
                1,
                new SQLException("ERROR: publication \"spillway_main\" does not exist", "42704")))
        .as("another failure Debezium tries again the same way")
        .isEqualTo(FilterReply.NEUTRAL);
    assertThat(slotBusyWarning("{}", "other arguments"))
        .as("words it does not know the arguments of")
        .isEqualTo(FilterReply.NEUTRAL);
  }

  @Test
  void should_keep_debeziums_restart_warning_when_no_failure_was_just_replaced() {
    assertThat(restartWarning())
        .as("a later attempt during an outage")
        .isEqualTo(FilterReply.NEUTRAL);
  }

  @Test
  void should_say_a_database_is_back_only_after_its_loss_was_announced() {
    List<String> lines =
        said(
            () -> {
              // The failure on Debezium's thread, which names its logical server.
              MDC.put("dbz.connectorLogicalName", "spillway-main");
              assertThat(producerFailure(new SQLException("gone", "08006")))
                  .isEqualTo(FilterReply.DENY);
              MDC.clear();
              // The engine's thread names only Kafka Connect's context.
              MDC.put("connector.context", "[spillway-capture-main|task-1] ");
              assertThat(restartWarning()).isEqualTo(FilterReply.DENY);
              restarted();
              MDC.put("connector.context", "[spillway-capture-ci|task-1] ");
              assertThat(restartWarning())
                  .as("another database's restart, after a failure left as Debezium logged it")
                  .isEqualTo(FilterReply.NEUTRAL);
              restarted();
            });
    assertThat(lines)
        .containsExactly(
            "Capture of database main lost its connection to the server (gone); it reconnects,"
                + " trying every 10 s, and goes on from the last change it stored.",
            "Capture of database main reconnected.");
  }

  @Test
  void should_say_a_lost_connection_once_when_debezium_fails_twice_for_it() {
    List<String> lines =
        said(
            () -> {
              MDC.put("dbz.connectorLogicalName", "spillway-main");
              for (int i = 0; i < 2; i++) {
                assertThat(producerFailure(new SQLException("gone", "08006")))
                    .isEqualTo(FilterReply.DENY);
                assertThat(restartWarning())
                    .as("the echo of failure %d", i + 1)
                    .isEqualTo(FilterReply.DENY);
                nanos.addAndGet(5_000_000_000L); // Debezium tries again after a few seconds
              }
              restarted();
              producerFailure(new SQLException("gone again", "08006"));
            });
    assertThat(lines)
        .as("the second loss, after reconnecting, said again")
        .containsExactly(
            "Capture of database main lost its connection to the server (gone); it reconnects,"
                + " trying every 10 s, and goes on from the last change it stored.",
            "Capture of database main reconnected.",
            "Capture of database main lost its connection to the server (gone again); it"
                + " reconnects, trying every 10 s, and goes on from the last change it stored.");
  }

  @Test
  void should_say_the_first_loss_of_a_capture_started_after_one_that_never_reconnected() {
    // As logback runs it: captureStarts reaches the filters of the process's logger context.
    LoggerContext running = (LoggerContext) LoggerFactory.getILoggerFactory();
    running.addTurboFilter(filter);
    List<String> lines;
    try {
      lines =
          said(
              () -> {
                MDC.put("dbz.connectorLogicalName", "spillway-main");
                producerFailure(new SQLException("gone", "08006"));
                ReconnectLogFilter.captureStarts("main"); // that capture stopped; another starts
                nanos.addAndGet(1_000_000_000L);
                producerFailure(new SQLException("gone again", "08006"));
              });
    } finally {
      running.getTurboFilterList().remove(filter);
    }
    assertThat(lines).hasSize(2);
  }

  @Test
  void should_name_the_failure_and_its_deepest_cause_when_it_adds_something() {
    SQLException eof = new SQLException("Database connection failed when reading from copy");
    eof.initCause(new EOFException());
    assertThat(ReconnectLogFilter.rootMessage(eof))
        .isEqualTo("Database connection failed when reading from copy");
    SQLException refused = new SQLException("Connection to localhost:5432 refused.");
    refused.initCause(new java.net.ConnectException("Connection refused"));
    assertThat(ReconnectLogFilter.rootMessage(new RuntimeException("Could not connect", refused)))
        .isEqualTo("Could not connect: Connection refused");
  }
}
