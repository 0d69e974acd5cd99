package dev.spillway.buffers;

import dev.spillway.event.BufferBatch;
import dev.spillway.event.BufferEvent;
import dev.spillway.event.EventSerdes;
import dev.spillway.event.TableName;
import dev.spillway.health.Health;
import dev.spillway.health.HealthGate;
import dev.spillway.ops.StatusReport;
import dev.spillway.sink.BatchHandler;
import dev.spillway.sink.Outcome;
import dev.spillway.sink.RunContext;
import dev.spillway.sink.SinkHeaders;
import dev.spillway.sink.SinkRecord;
import dev.spillway.sink.Target;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.Function;
import java.util.function.ToLongBiFunction;
import javax.sql.DataSource;
import org.apache.kafka.common.errors.SerializationException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Runs the batches of every buffer through the sink: the batch's topic says which buffer it is.
 * Each run is a {@link BatchRun}; after a batch's rest is dead-lettered, its rows are deleted or
 * kept per {@code on-exhausted}. Thread-safe.
 */
final class BufferBatchHandler implements BatchHandler, AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(BufferBatchHandler.class);

  /**
   * A buffer's dead letter says whether its rows were {@code kept} in the table or {@code deleted};
   * kept by a replay, which starts from the letter's headers.
   */
  static final String ROWS = "spillway.buffer.rows";

  private static final byte[] KEPT = "kept".getBytes(StandardCharsets.UTF_8);
  private static final byte[] DELETED = "deleted".getBytes(StandardCharsets.UTF_8);

  private final Map<String, RunningBuffer> byTopic;
  private final Function<String, DataSource> dataSources;
  private final HealthGate gate;
  private final Clock clock;

  /**
   * @param byTopic each buffer under its batches topic
   * @param gate asked before the rows of a dead-lettered batch are deleted, as a run asks before
   *     its statements
   */
  BufferBatchHandler(
      Map<String, RunningBuffer> byTopic,
      Function<String, DataSource> dataSources,
      HealthGate gate,
      Clock clock) {
    this.byTopic = Map.copyOf(byTopic);
    this.dataSources = dataSources;
    this.gate = gate;
    this.clock = clock;
  }

  @Override
  public Optional<Target> target(SinkRecord record) {
    RunningBuffer b = byTopic.get(record.topic());
    return b == null
        ? Optional.empty()
        : Optional.of(new Target(b.settings.database(), b.settings.table()));
  }

  @Override
  public Outcome execute(SinkRecord record, RunContext context) throws Exception {
    RunningBuffer b = byTopic.get(record.topic());
    BufferBatch batch;
    try {
      batch = EventSerdes.decodeBufferBatch(record.value());
    } catch (SerializationException e) {
      return new Outcome.PermanentFailure(e);
    }
    // Captured before the buffer moved to another database: their ids name rows of the other
    // database's table, and looked up here they would find (and delete) other rows. Captured before
    // the table's key column was renamed: they carry no id to look their rows up by, and would
    // count as deleted since. Both go to the dead letters, their rows left where they are; the
    // batch's other events run. A renamed table is no such case: its rows are the same rows.
    String key = b.table().idColumn();
    List<BufferEvent> here = new ArrayList<>();
    List<BufferEvent> elsewhere = new ArrayList<>();
    List<BufferEvent> keyless = new ArrayList<>();
    for (BufferEvent e : batch.events()) {
      if (!e.database().equals(b.settings.database())) {
        elsewhere.add(e);
      } else if (e.row().get(key) == null) {
        keyless.add(e);
      } else {
        here.add(e);
      }
    }
    if (elsewhere.isEmpty() && keyless.isEmpty()) {
      return run(b, batch, record, context);
    }
    List<String> why = new ArrayList<>();
    if (!elsewhere.isEmpty()) {
      why.add(
          "batch of rows captured from database "
              + elsewhere.get(0).database()
              + ", but buffer "
              + b.settings.name()
              + " now works on database "
              + b.settings.database()
              + ": its rows are left where they are");
    }
    if (!keyless.isEmpty()) {
      why.add(
          "batch of rows captured without column "
              + key
              + ", the key of "
              + b.settings.table()
              + " (renamed since? they carry "
              + String.join(", ", keyless.get(0).row().keySet())
              + "): their rows are left in the table, and `bin/spillway buffers reread "
              + b.settings.name()
              + "` hands them over");
    }
    IllegalStateException error = new IllegalStateException(String.join("; ", why));
    List<BufferEvent> aside = new ArrayList<>(elsewhere);
    aside.addAll(keyless);
    if (here.isEmpty()) {
      return new Outcome.PermanentFailure(error);
    }
    Outcome ran = run(b, batch.withEvents(here), record, context);
    return withEventsOf(ran, batch, aside, error);
  }

  private Outcome run(RunningBuffer b, BufferBatch batch, SinkRecord record, RunContext context)
      throws Exception {
    b.metrics.inFlight().incrementAndGet();
    try {
      boolean replayed = record.headers().containsKey(SinkHeaders.REPLAYED_FROM);
      return new BatchRun(b, batch, retryKey(record), replayed, fromEvents(record), context, clock)
          .run();
    } finally {
      b.metrics.inFlight().decrementAndGet();
    }
  }

  /**
   * The outcome of a run of a batch's events that could run, those set aside (the other database's,
   * or without the key column) added back to what goes on of it: dead-lettered alone once the rest
   * is done, else along with the rest put back or dead-lettered (a record run again or
   * dead-lettered as received holds them still).
   */
  private static Outcome withEventsOf(
      Outcome ran, BufferBatch batch, List<BufferEvent> aside, IllegalStateException error) {
    if (ran instanceof Outcome.Done) {
      return new Outcome.PermanentFailure(error, encoded(batch, null, aside));
    }
    if (ran instanceof Outcome.Paused p && p.rest() != null) {
      return new Outcome.Paused(p.reason(), encoded(batch, p.rest(), aside));
    }
    if (ran instanceof Outcome.RetryableFailure f && f.deadLetter() != null) {
      return new Outcome.RetryableFailure(
          along(f.error(), aside, error), encoded(batch, f.deadLetter(), aside));
    }
    if (ran instanceof Outcome.PermanentFailure f && f.deadLetter() != null) {
      return new Outcome.PermanentFailure(
          along(f.error(), aside, error), encoded(batch, f.deadLetter(), aside));
    }
    return ran;
  }

  /**
   * The failure of a letter that holds events set aside (the other database's, or without the key
   * column) beside what failed here: both reasons. A letter says one fate for all its rows, and
   * those set aside were never touched, so it says they are all kept: the others' too, even under
   * {@code on-exhausted: delete}, so that its replay hands over what is still buffered.
   */
  private static Throwable along(
      Throwable failure, List<BufferEvent> aside, IllegalStateException error) {
    return new IllegalStateException(
        failure.getMessage() + "; with " + aside.size() + " event(s) of a " + error.getMessage(),
        failure);
  }

  /** The batch of the events of {@code rest} (an encoded batch; null for none) and {@code more}. */
  private static byte[] encoded(BufferBatch batch, byte[] rest, List<BufferEvent> more) {
    List<BufferEvent> events = new ArrayList<>();
    if (rest != null) {
      events.addAll(EventSerdes.decodeBufferBatch(rest).events());
    }
    events.addAll(more);
    return EventSerdes.encode(batch.withEvents(events));
  }

  /**
   * Whether the letter's rows stay in the table ({@code kept}) or go ({@code deleted}: the
   * handler's calls ran out under {@code on-exhausted: delete}), so that its replay hands over only
   * the kept rows still there, and all of those deleted. A batch replayed whole, its rows gone
   * before it ran, leaves its letter saying what the record said: its rows are gone still.
   */
  @Override
  public Map<String, byte[]> deadLetterHeaders(SinkRecord record, Throwable error) {
    if (fromEvents(record)) {
      return Map.of();
    }
    RunningBuffer b = byTopic.get(record.topic()); // none for a letter of the delay topic
    boolean deleted =
        error instanceof BufferExhaustedException
            && b != null
            && b.settings.onExhausted() == OnExhausted.DELETE;
    return Map.of(ROWS, deleted ? DELETED : KEPT);
  }

  /**
   * Whether the record is a replay whose rows may be gone (its letter did not say they were kept):
   * handed over from its events.
   */
  private static boolean fromEvents(SinkRecord record) {
    return record.headers().containsKey(SinkHeaders.REPLAYED_FROM)
        && !Arrays.equals(record.headers().get(ROWS), KEPT);
  }

  @Override
  public void deadLettered(SinkRecord record, byte[] value, Throwable error) throws SQLException {
    RunningBuffer b = byTopic.get(record.topic());
    if (b == null) {
      return;
    }
    String key = retryKey(record);
    if (!(error instanceof BufferExhaustedException exhausted)) {
      // Not handled to the end (an archive table lacking a column, a statement that failed for
      // good, a batch that does not decode): its rows stay, and it counts with the events
      // dead-lettered (those left when part of it was handled).
      b.settled(key);
      b.metrics.deadLettered(eventsOf(value));
      return;
    }
    b.metrics.deadLettered(exhausted.ids().size());
    if (b.settings.onExhausted() == OnExhausted.DELETE) {
      // Should the delete fail, the batch runs again (it is not committed): that run deletes its
      // rows and does no more.
      b.retrying(key, RunningBuffer.Retrying.afterDeadLetter(exhausted.ids()));
      Health health = gate.state(b.settings.database(), b.settings.table());
      if (health.isStop()) {
        // The batch's next run deletes them once the table may be written to again.
        throw new SQLException(
            "its rows are deleted once "
                + b.settings.table()
                + " is out of STOP ("
                + health.reason()
                + ")");
      }
      try (Connection c = dataSources.apply(b.settings.database()).getConnection()) {
        BufferStatements.deleteExhausted(c, b.table(), exhausted.ids());
      }
    }
    b.settled(key);
  }

  /**
   * What a batch's retries are remembered by between its runs: its group id (batches are keyed by
   * it), and for a replay the dead letter it came from, so a replay counts from 1 in a process that
   * ran the batch before. A record written without a key (not by Spillway) goes by its position, so
   * such batches do not share one count.
   */
  static String retryKey(SinkRecord record) {
    String group =
        record.key() == null ? record.position() : new String(record.key(), StandardCharsets.UTF_8);
    byte[] from = record.headers().get(SinkHeaders.REPLAYED_FROM);
    return from == null ? group : group + " replayed from " + SinkHeaders.text(from);
  }

  private static int eventsOf(byte[] value) {
    try {
      return EventSerdes.decodeBufferBatch(value).events().size();
    } catch (SerializationException e) {
      return 0;
    }
  }

  /**
   * One status line per buffer, its rows as last counted in the background.
   *
   * @param tooLarge rows of a database's table capture found too large for Kafka since start
   */
  List<StatusReport.BufferStatus> status(ToLongBiFunction<String, TableName> tooLarge) {
    List<StatusReport.BufferStatus> out = new ArrayList<>();
    long now = clock.millis();
    for (RunningBuffer b : byTopic.values()) {
      out.add(
          new StatusReport.BufferStatus(
              b.settings.name(),
              b.settings.database(),
              b.settings.table().toString(),
              b.metrics.rowsWaiting(),
              b.metrics.inFlight().get(),
              b.metrics.handledCount(),
              b.metrics.deadLetteredBatchCount(),
              b.metrics.deadLetteredEventCount(),
              tooLarge.applyAsLong(b.settings.database(), b.settings.table()),
              b.metrics.malformedCount(),
              b.metrics.republishedCount(),
              b.metrics.percentileMillis(0.5, now),
              b.metrics.percentileMillis(0.99, now)));
    }
    out.sort(java.util.Comparator.comparing(StatusReport.BufferStatus::name));
    return out;
  }

  @Override
  public void close() {
    closeHandlers(byTopic.values());
  }

  /**
   * How long closing waits, in all, for handler calls still under way: a call the stop interrupted
   * that goes on regardless (blocked in I/O that takes no interrupt).
   */
  static final Duration CLOSE_WAIT = Duration.ofSeconds(10);

  /** As {@link #closeHandlers(java.util.Collection, Duration)}, waiting {@link #CLOSE_WAIT}. */
  static void closeHandlers(java.util.Collection<RunningBuffer> buffers) {
    closeHandlers(buffers, CLOSE_WAIT);
  }

  /**
   * Closes each buffer's handler once its calls under way have ended, waiting {@code wait} in all
   * for them; a failure is logged and the others are closed still, an {@code Error} thrown once
   * they are.
   */
  static void closeHandlers(java.util.Collection<RunningBuffer> buffers, Duration wait) {
    long deadline = System.nanoTime() + wait.toNanos();
    Error first = null;
    for (RunningBuffer b : buffers) {
      try {
        b.closeHandler(deadline);
      } catch (Exception e) {
        log.warn("Closing the handler of buffer {} failed: {}", b.settings.name(), e.getMessage());
      } catch (Error e) {
        log.error("Closing the handler of buffer {} failed: {}", b.settings.name(), e.toString());
        first = first == null ? e : first;
      }
    }
    if (first != null) {
      throw first;
    }
  }
}
