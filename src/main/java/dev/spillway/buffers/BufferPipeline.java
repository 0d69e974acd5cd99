package dev.spillway.buffers;

import dev.spillway.capture.CaptureRoute;
import dev.spillway.capture.ChangeKind;
import dev.spillway.config.ConfigException;
import dev.spillway.config.SpillwayConfig;
import dev.spillway.event.BufferBatch;
import dev.spillway.event.EventSerdes;
import dev.spillway.event.Pipeline;
import dev.spillway.event.TableName;
import dev.spillway.event.Topics;
import dev.spillway.health.StandardIndicators;
import dev.spillway.jdbc.Databases;
import dev.spillway.ops.DeadLetterReplay;
import dev.spillway.runtime.SpillwayRuntime;
import dev.spillway.sink.BatchesTopic;
import dev.spillway.sink.Sink;
import dev.spillway.sink.SinkSettings;
import dev.spillway.streams.Batcher;
import dev.spillway.support.Sampled;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.stream.Collectors;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The buffer tables pipeline: capture of their inserts, one Streams application per buffer grouping
 * them into batches, and one sink running every buffer's batches through its handler. Built from
 * the configuration before anything starts (so its errors come first), then started on a runtime;
 * capture is the caller's, with {@link #routes} beside other pipelines' routes.
 */
public final class BufferPipeline {
  private static final Logger log = LoggerFactory.getLogger(BufferPipeline.class);

  private final List<BufferSettings> buffers;
  private final Duration percentileWindow;

  private BufferPipeline(List<BufferSettings> buffers, Duration percentileWindow) {
    this.buffers = List.copyOf(buffers);
    this.percentileWindow = percentileWindow;
  }

  /** The buffers of the configuration's {@code buffers:} section; checks it at once. */
  public static BufferPipeline fromConfig(SpillwayConfig config) {
    return new BufferPipeline(BuffersSection.read(config), BufferMetrics.DEFAULT_WINDOW);
  }

  public static BufferPipeline of(List<BufferSettings> buffers) {
    return new BufferPipeline(buffers, BufferMetrics.DEFAULT_WINDOW);
  }

  /**
   * The same buffers, whose insert-to-handled percentiles and max (the metric {@code
   * spillway_buffer_insert_to_handled} and the status line) cover the last {@code window} at most
   * rather than two minutes: a benchmark's, say, its whole run.
   */
  public BufferPipeline withPercentileWindow(Duration window) {
    return new BufferPipeline(buffers, window);
  }

  public List<BufferSettings> buffers() {
    return buffers;
  }

  public boolean isEmpty() {
    return buffers.isEmpty();
  }

  /** Inserts of each buffer table, to its events topic. */
  public List<CaptureRoute> routes(Topics topics) {
    List<CaptureRoute> routes = new ArrayList<>();
    for (BufferSettings b : buffers) {
      routes.add(
          new CaptureRoute(
              b.database(), b.table(), ChangeKind.INSERT, topics.bufferEvents(b.name())));
    }
    return routes;
  }

  /** The batches of these buffers, as a replay of the dead-letter topic reads them. */
  public DeadLetterReplay.Batches deadLetterBatches(Topics topics) {
    java.util.Set<String> batchesTopics = new java.util.HashSet<>();
    buffers.forEach(b -> batchesTopics.add(topics.bufferBatches(b.name())));
    return new DeadLetterReplay.Batches(
        batchesTopics::contains,
        value -> {
          BufferBatch batch = EventSerdes.decodeBufferBatch(value);
          return new DeadLetterReplay.Batch(batch.buffer(), batch.events().size());
        });
  }

  /** What runs once {@link #start} returned. */
  public record Running(Sink sink, Map<String, BufferSettings> buffers) {}

  /**
   * The buffers checked against their databases, with their handlers, not started yet. Closing it
   * closes the handlers: whoever checked closes it once the sink that calls them has stopped, or
   * when the start goes no further.
   */
  public static final class Checked implements AutoCloseable {
    private final Map<String, RunningBuffer> byTopic;
    private final Map<String, BufferMetrics> metricsOf;
    private final List<BatchesTopic> batches;
    private final List<String> needed;
    private final int inFlight;

    private Checked(
        Map<String, RunningBuffer> byTopic,
        Map<String, BufferMetrics> metricsOf,
        List<BatchesTopic> batches,
        List<String> needed,
        int inFlight) {
      this.byTopic = byTopic;
      this.metricsOf = metricsOf;
      this.batches = batches;
      this.needed = needed;
      this.inFlight = inFlight;
    }

    @Override
    public void close() {
      BufferBatchHandler.closeHandlers(byTopic.values());
    }
  }

  /**
   * Checks every buffer table (and archive table) against its database's catalog and makes each
   * handler (an sql handler's statement described), starting nothing: {@code run} checks every
   * pipeline before it starts any.
   *
   * @throws ConfigException naming the buffer when its table, archive table or handler is unfit
   */
  public Checked check(SpillwayRuntime runtime, Clock clock) throws SQLException {
    Topics topics = runtime.topics();
    Map<String, RunningBuffer> byTopic = new LinkedHashMap<>();
    Map<String, BufferMetrics> metricsOf = new LinkedHashMap<>();
    List<BatchesTopic> batches = new ArrayList<>();
    List<String> needed = new ArrayList<>();
    int inFlight = 0;
    // A scrape (or a report) asks every buffer's count in turn: together they wait at most this.
    Duration countWait = ROWS_COUNT_WAIT.dividedBy(Math.max(1, buffers.size()));
    try {
      for (BufferSettings b : buffers) {
        DataSource ds = runtime.databases().dataSource(b.database());
        BufferTable table = check(b, ds);
        Sampled<Long> rows = new Sampled<>(() -> countRows(ds, b), ROWS_COUNT_KEPT_FOR, clock);
        BufferMetrics metrics =
            new BufferMetrics(
                runtime.registry(),
                b.name(),
                () -> rows.get(countWait).map(Sampled.Reading::value).orElse(null),
                percentileWindow);
        metricsOf.put(b.name(), metrics);
        String topic = topics.bufferBatches(b.name());
        // Made last, so a handler made is one the catch below can close.
        byTopic.put(topic, new RunningBuffer(b, table, handler(b, table, ds, clock), metrics));
        batches.add(new BatchesTopic(topic, b.maxInFlight()));
        needed.add(topics.bufferEvents(b.name()));
        needed.add(topic);
        inFlight += b.maxInFlight();
      }
    } catch (Throwable t) {
      // A buffer unfit: the handlers made for those before it (a class's connections, say) are
      // closed here, as nothing else holds them yet.
      BufferBatchHandler.closeHandlers(byTopic.values());
      throw t;
    }
    return new Checked(byTopic, metricsOf, batches, needed, inFlight);
  }

  /**
   * Checks every buffer ({@link #check}), creates the topics, starts each buffer's Streams
   * application and the sink. Returns empty when no buffer is configured.
   *
   * @throws ConfigException naming the buffer when its table is missing or unfit
   */
  public Optional<Running> start(SpillwayRuntime runtime, Clock clock)
      throws SQLException, InterruptedException {
    if (buffers.isEmpty()) {
      return Optional.empty();
    }
    Checked checked = check(runtime, clock);
    runtime.closeWith(checked); // closed after the sink has stopped
    return start(runtime, checked, clock);
  }

  /**
   * Starts the buffers {@link #check} checked, whose handlers the caller closes by closing {@code
   * checked} once the sink has stopped ({@link SpillwayRuntime#closeWith}, before this, does so).
   */
  public Optional<Running> start(SpillwayRuntime runtime, Checked checked, Clock clock)
      throws InterruptedException {
    if (buffers.isEmpty()) {
      return Optional.empty();
    }
    Topics topics = runtime.topics();
    runtime.ensureTopics(checked.needed);
    for (BufferSettings b : buffers) {
      runtime.startStreams(
          Pipeline.BUFFERS,
          b.name(),
          BufferTopology.build(
              b,
              topics,
              checked.metricsOf.get(b.name())::malformed,
              checked.metricsOf.get(b.name())::republished),
          Batcher.tick(b.maxWait()));
    }
    for (BufferSettings b : buffers) {
      // Routine for a buffer table, which its deletes keep small: a wraparound one still stops.
      runtime.health().exemptFromThrottle(b.database(), b.table(), StandardIndicators.AUTOVACUUM);
    }
    BufferBatchHandler handler =
        new BufferBatchHandler(
            checked.byTopic, runtime.databases()::dataSource, runtime.health(), clock);
    Sink sink =
        runtime.startSink(
            Pipeline.BUFFERS,
            checked.batches,
            handler,
            sinkSettings(runtime.config().sink(), checked.inFlight));
    runtime.reportBuffers(() -> handler.status(runtime.captureStats()::tooLargeInserts));
    Map<String, BufferSettings> byName = new LinkedHashMap<>();
    buffers.forEach(b -> byName.put(b.name(), b));
    for (BufferSettings b : buffers) {
      log.info(
          "Buffer {}: {} in {}, batches of {} within {}, handler {}",
          b.name(),
          b.table(),
          b.database(),
          b.batchSize(),
          b.maxWait(),
          b.handler());
    }
    return Optional.of(new Running(sink, byName));
  }

  /**
   * The configured sink settings, with room for every buffer's batches at once and without the
   * per-run limits: a run is bounded by its handler calls ({@code max-attempts}, timeouts). No
   * batch steps aside from a table at STOP: a buffer's partitions hold its batches only, all for
   * its one table, so the batches behind one would wait for the same STOP.
   */
  static SinkSettings sinkSettings(SinkSettings s, int inFlight) {
    return new SinkSettings(
        s.consumers(),
        Math.max(1, inFlight),
        s.maxAttempts(),
        s.consumeAfter(),
        s.maxRetries(),
        s.retryBackoff(),
        s.retryBackoffMax(),
        Long.MAX_VALUE,
        // None: a run waiting out a day's quota (429s, an hour's Retry-After each) ended as a
        // limit reached, went back whole, and counted toward the sink's max-attempts.
        Duration.ofMillis(Long.MAX_VALUE),
        s.subBatchPause(),
        s.throttlePause(),
        s.throttleFactor(),
        s.subBatchFloor(),
        s.pollTimeout(),
        s.shutdownGrace(),
        Duration.ZERO);
  }

  /**
   * How long a metrics scrape or the status report waits for the rows waiting in the buffer tables
   * to be counted, all of them together (a count that takes longer, on a database down or a pool at
   * work, ends in the background), and how long a count is shown after it was taken.
   */
  private static final Duration ROWS_COUNT_WAIT = Duration.ofSeconds(1);

  private static final Duration ROWS_COUNT_KEPT_FOR = Duration.ofSeconds(60);

  /** The rows in the buffer's table now: exact up to 100,000, estimated above. */
  public static long countRows(DataSource ds, BufferSettings b) throws SQLException {
    try (Connection c = ds.getConnection()) {
      return BufferStatements.rowsWaiting(c, b.table());
    }
  }

  /** A type as {@link BufferStatements#shape} names it, an array type as {@code element[]}. */
  static String arrayTypeShown(String type) {
    int dot = type.lastIndexOf('.') + 1; // pg_type names an array type _element
    return type.startsWith("_", dot)
        ? type.substring(0, dot) + type.substring(dot + 1) + "[]"
        : type;
  }

  /** A buffer refused for its key's type: {@code typeAndWhy} follows "is of type". */
  private static ConfigException keyRefused(
      BufferSettings b, BufferStatements.Shape shape, String typeAndWhy) {
    return error(
        b,
        "table",
        "names table "
            + b.table().displayName()
            + ", whose primary key "
            + shape.idColumn()
            + " is of type "
            + typeAndWhy);
  }

  /**
   * What capture needs of the buffers' tables (there, with a primary key), for buffers held back
   * while their inserts are still captured ({@code run --only lfk}): a table capture would refuse
   * is named with its buffer's entry, before anything runs. The rest of {@link #check} waits for
   * the buffers to run, so one being mended does not hold the other pipelines back.
   */
  public void checkTables(SpillwayRuntime runtime) throws SQLException {
    checkTables(buffers, runtime.databases());
  }

  /**
   * Refuses, with its buffer's entry named, a table among {@code chosen}'s that capture would not
   * read: one not there, or without a single-column primary key.
   */
  public static void checkTables(List<BufferSettings> chosen, Databases databases)
      throws SQLException {
    for (BufferSettings b : chosen) {
      try (Connection c = databases.dataSource(b.database()).getConnection()) {
        shape(b, c);
      }
    }
  }

  /** The buffer table's shape; refused when it is not there or has no single-column key. */
  private static BufferStatements.Shape shape(BufferSettings b, Connection c) throws SQLException {
    BufferStatements.Shape shape =
        BufferStatements.shape(c, b.table())
            .orElseThrow(
                () ->
                    error(
                        b,
                        "table",
                        "names table "
                            + b.table().displayName()
                            + ", which does not exist in database "
                            + b.database()));
    if (shape.idColumn() == null) {
      throw error(
          b,
          "table",
          "names table "
              + b.table().displayName()
              + ", which has no single-column primary key to delete handled rows by");
    }
    return shape;
  }

  static BufferTable check(BufferSettings b, DataSource ds) throws SQLException {
    try (Connection c = ds.getConnection()) {
      BufferStatements.Shape shape = shape(b, c);
      if (BufferStatements.rowSecurityActive(c, b.table())) {
        throw error(b, "table", "names table " + rowSecurity(b.table()));
      }
      List<String[]> uncapturable = BufferStatements.uncapturable(c, b.table());
      if (!uncapturable.isEmpty()) {
        throw error(
            b,
            "table",
            "names table "
                + b.table().displayName()
                + ", whose column(s) "
                + uncapturable.stream()
                    .map(col -> col[0] + " (" + col[1] + ")")
                    .collect(Collectors.joining(", "))
                + " capture cannot pass on as values PostgreSQL reads back (they would reach the"
                + " handler missing or garbled); store them as text, or keep them out of the buffer"
                + " table");
      }
      try {
        BufferStatements.idArray(c, shape.idType(), List.of());
      } catch (SQLException e) {
        // Every statement passes the batch's ids as an array of the key's type.
        throw keyRefused(
            b,
            shape,
            arrayTypeShown(shape.idType())
                + ", which cannot be passed as an array parameter ("
                + e.getMessage()
                + "); key the buffer by a column of a scalar type");
      }
      if ("timetz".equals(BufferStatements.baseType(c, b.table(), shape.idColumn()))) {
        // Capture passes it on turned to UTC, and timetz equality compares the zone too: the row
        // would never be found again, never handed over, never deleted.
        throw keyRefused(
            b,
            shape,
            "time with time zone, which capture passes on turned to UTC and so cannot be looked up"
                + " again; key the buffer by a column of another type");
      }
      List<String[]> asJson = BufferStatements.passedAsJson(c, b.table());
      if (asJson.stream().anyMatch(col -> col[0].equals(shape.idColumn()))) {
        throw keyRefused(
            b,
            shape,
            "hstore, which capture passes on as JSON, which hstore does not read, and so cannot be"
                + " looked up again; key the buffer by a column of another type");
      }
      if (b.archiveTable().isPresent()
          && b.onExhausted() == OnExhausted.DELETE
          && !asJson.isEmpty()) {
        // A replayed batch whose rows were deleted when dead-lettered is archived from its events.
        throw error(
            b,
            "archive-table",
            "has archive-table "
                + b.archiveTable().get().displayName()
                + ", but capture passes column(s) "
                + asJson.stream()
                    .map(col -> col[0] + " (" + col[1] + ")")
                    .collect(Collectors.joining(", "))
                + " of "
                + b.table().displayName()
                + " on as JSON, which their type does not read, so a replayed batch's rows could"
                + " not be archived from its events; store them as text, or leave archive-table"
                + " out");
      }
      if (b.archiveTable().isPresent()) {
        List<String> archive = BufferStatements.columns(c, b.archiveTable().get());
        if (archive.isEmpty()) {
          throw error(
              b,
              "archive-table",
              "has archive-table "
                  + b.archiveTable().get().displayName()
                  + ", which does not exist in database "
                  + b.database());
        }
        if (BufferStatements.rowSecurityActive(c, b.archiveTable().get())) {
          throw error(
              b, "archive-table", "has archive-table " + rowSecurity(b.archiveTable().get()));
        }
        List<String> missing = BufferStatements.lacking(archive, shape.columns());
        if (!missing.isEmpty()) {
          throw error(
              b,
              "archive-table",
              "has archive-table "
                  + b.archiveTable().get().displayName()
                  + ", which lacks the buffer's column(s) "
                  + String.join(", ", missing));
        }
      }
      BufferTable table =
          new BufferTable(
              b.table(), shape.idColumn(), shape.idType(), shape.columns(), b.archiveTable());
      Optional<String> refused =
          b.archiveTable().isPresent()
              ? BufferStatements.archiveRefusal(c, table)
              : Optional.empty();
      if (refused.isPresent()) {
        throw error(
            b,
            "archive-table",
            "has archive-table "
                + b.archiveTable().get().displayName()
                + ", which PostgreSQL refuses to copy the buffer's rows into: "
                + refused.get());
      }
      return table;
    }
  }

  /** Why a table whose row-level security applies to Spillway's role cannot serve a buffer. */
  private static String rowSecurity(TableName table) {
    return table.displayName()
        + ", whose row-level security applies to Spillway's role, so the buffer's statements would"
        + " fail on it (they do not let a policy hide rows, which would look handled); make the"
        + " role the table's owner (without FORCE ROW LEVEL SECURITY) or give it BYPASSRLS";
  }

  static BulkHandler handler(BufferSettings b, BufferTable table, DataSource ds, Clock clock) {
    HandlerSpec spec = b.handler();
    if (spec instanceof HandlerSpec.Http http) {
      return new HttpBulkHandler(http, clock);
    }
    if (spec instanceof HandlerSpec.Sql sql) {
      SqlBulkHandler handler =
          new SqlBulkHandler(ds, sql.statement(), table.idType(), sql.timeout());
      Optional<String> refusal;
      try {
        refusal = handler.refusal();
      } catch (SQLException e) {
        throw new IllegalStateException(
            "Could not check the sql handler of buffer " + b.name() + ": " + e.getMessage(), e);
      }
      if (refusal.isPresent()) {
        throw error(b, "handler", "has an sql handler PostgreSQL refuses: " + refusal.get());
      }
      return handler;
    }
    Class<? extends BulkHandler> type = ((HandlerSpec.JavaClass) spec).type();
    try {
      return type.getConstructor().newInstance();
    } catch (ReflectiveOperationException | LinkageError e) {
      // A constructor's own exception, or a static initializer's (loading did not run it): a
      // problem of the configuration or of the class's own (a setting it reads missing), which a
      // restart would meet again, so exit 2 at the handler's line.
      Throwable cause = e.getCause() == null ? e : e.getCause();
      throw error(
          b,
          "handler",
          "names the handler class " + type.getName() + ", which could not be created: " + cause);
    }
  }

  /** A problem of buffer {@code b} found at its key {@code at}, which gives the line. */
  private static ConfigException error(BufferSettings b, String at, String problem) {
    BufferSettings.Origin o = b.origin();
    return new ConfigException(o.source(), o.line(at), o.key(), problem);
  }
}
