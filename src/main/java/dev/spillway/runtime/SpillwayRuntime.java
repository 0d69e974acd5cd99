package dev.spillway.runtime;

import dev.spillway.capture.Capture;
import dev.spillway.capture.CapturePlan;
import dev.spillway.capture.CaptureRoute;
import dev.spillway.capture.CaptureSettings;
import dev.spillway.capture.CaptureStats;
import dev.spillway.capture.SlotState;
import dev.spillway.config.DatabaseConfig;
import dev.spillway.config.DurationText;
import dev.spillway.config.SpillwayConfig;
import dev.spillway.event.Pipeline;
import dev.spillway.event.TopicProvisioner;
import dev.spillway.event.Topics;
import dev.spillway.health.HealthMonitor;
import dev.spillway.health.LatencyWindow;
import dev.spillway.health.StandardIndicators;
import dev.spillway.jdbc.DatabaseEndpoint;
import dev.spillway.jdbc.Databases;
import dev.spillway.ops.ConsumerLagGauges;
import dev.spillway.ops.HttpEndpoint;
import dev.spillway.ops.StatusReport;
import dev.spillway.sink.BatchHandler;
import dev.spillway.sink.BatchesTopic;
import dev.spillway.sink.Sink;
import dev.spillway.sink.SinkSettings;
import dev.spillway.streams.StreamsApp;
import dev.spillway.support.Sampled;
import dev.spillway.support.ShutdownHooks;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.io.IOException;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.apache.kafka.streams.Topology;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Everything one Spillway process runs, started in dependency order and closed in reverse:
 * working-directory lock, embedded PostgreSQL and Kafka (when not configured), connection pools,
 * metrics and the HTTP port, then capture. Closing stops capture first, so every change it
 * acknowledged is in Kafka before the broker stops.
 */
public final class SpillwayRuntime implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(SpillwayRuntime.class);

  /** The embedded database when none is configured. */
  public static final String MAIN = "main";

  // The Streams applications run exactly once: each commit ends the transaction holding the
  // batches closed since the last one, so the interval bounds how long a closed batch waits to be
  // seen, and what a crash makes them read and batch again.
  private static final java.time.Duration STREAMS_COMMIT_INTERVAL =
      java.time.Duration.ofMillis(100);

  /** The longest {@link #close()} waits for the embedded PostgreSQL still starting, to stop it. */
  private static final java.time.Duration POSTGRES_START_WAIT = java.time.Duration.ofSeconds(90);

  /**
   * How long the status report waits for a database's slots to be read (a read that takes longer,
   * on a database down or a pool at work, ends in the background and serves the next report), and
   * how long a read is shown after it was taken.
   */
  private static final java.time.Duration SLOTS_WAIT = java.time.Duration.ofSeconds(2);

  private static final java.time.Duration SLOTS_KEPT_FOR = java.time.Duration.ofSeconds(60);

  private final Map<String, Sampled<List<SlotState>>> slotStates =
      new java.util.concurrent.ConcurrentHashMap<>();

  /** How long a batch of captured changes waits for Kafka before status shows it. */
  private static final java.time.Duration KAFKA_WAIT_SHOWN = java.time.Duration.ofSeconds(10);

  private final SpillwayConfig config;
  private final Clock clock;
  private final Instant startedAt;
  private final Deque<AutoCloseable> started = new ArrayDeque<>(); // guarded by this
  private boolean closing; // guarded by this

  /**
   * Set as a stop begins: what stops meanwhile (the embedded PostgreSQL told to, say) is no
   * failure.
   */
  private volatile boolean stopping;

  private boolean postgresStarting; // guarded by this
  private boolean captureStarting; // guarded by this

  /**
   * Whether {@link #startCapture} has set capture up or found nothing to capture: until then the
   * pipelines are starting and the status says capture is.
   */
  private volatile boolean captureSetUp;

  private final PrometheusMeterRegistry registry =
      new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
  private final CaptureStats captureStats = new CaptureStats(registry);
  private WorkingDirectory workingDir;
  private String bootstrapServers;
  private Databases databases;
  private HttpEndpoint http;
  private volatile ConsumerLagGauges lagGauges;
  private volatile Capture capture;
  private volatile EmbeddedPostgresServer embeddedPostgres;
  private HealthMonitor health;
  private final Map<String, LatencyWindow> latency = new java.util.concurrent.ConcurrentHashMap<>();
  private final Map<Pipeline, Sink> sinks = new java.util.concurrent.ConcurrentHashMap<>();
  private final List<StreamsApp> streamsApps = new java.util.concurrent.CopyOnWriteArrayList<>();
  private volatile java.util.function.Supplier<List<StatusReport.BufferStatus>> bufferStatus =
      List::of;
  private final Thread shutdownHook = new Thread(this::closeOnSignal, "spillway-shutdown");
  private final CountDownLatch closed = new CountDownLatch(1);

  private SpillwayRuntime(SpillwayConfig config, Clock clock) {
    this.config = config;
    this.clock = clock;
    this.startedAt = clock.instant();
  }

  /**
   * Starts the infrastructure: lock, embedded servers where needed, pools, topics shared by every
   * pipeline, and the HTTP port. Capture starts separately ({@link #startCapture}) once the
   * pipelines know their routes.
   *
   * @param extraEmbeddedDatabases databases to create in the embedded server besides {@code main}
   */
  public static SpillwayRuntime start(
      SpillwayConfig config, Set<String> extraEmbeddedDatabases, Clock clock)
      throws IOException, InterruptedException {
    SpillwayRuntime runtime = new SpillwayRuntime(config, clock);
    // SIGINT or SIGTERM, whatever command is running, stops what was started (an embedded
    // PostgreSQL would otherwise outlive the JVM and keep the working directory's data).
    Runtime.getRuntime().addShutdownHook(runtime.shutdownHook);
    try {
      runtime.startInfrastructure(extraEmbeddedDatabases);
      return runtime;
    } catch (IOException | InterruptedException | RuntimeException e) {
      runtime.close();
      throw e;
    }
  }

  private void startInfrastructure(Set<String> extraEmbeddedDatabases)
      throws IOException, InterruptedException {
    workingDir = WorkingDirectory.acquire(config.workingDir());
    own(workingDir);
    // A port in use stops the start before a broker or a database is started for nothing.
    http = HttpEndpoint.bind(config.http().port());
    own(http);
    log.info("Configuration: {}", config.describe());

    List<DatabaseEndpoint> endpoints = new ArrayList<>();
    if (config.embeddedDatabases()) {
      List<String> names = new ArrayList<>(List.of(MAIN));
      extraEmbeddedDatabases.stream().filter(n -> !names.contains(n)).forEach(names::add);
      EmbeddedPostgresServer postgres = startPostgres(names);
      embeddedPostgres = postgres;
      for (String name : names) {
        endpoints.add(
            new DatabaseEndpoint(
                name,
                postgres.jdbcUrl(name),
                EmbeddedPostgresServer.SUPERUSER,
                null,
                DatabaseConfig.DEFAULT_POOL_SIZE,
                DatabaseConfig.DEFAULT_LOCK_TIMEOUT));
      }
    } else {
      for (DatabaseConfig d : config.databases().values()) {
        endpoints.add(
            new DatabaseEndpoint(
                d.name(), d.url(), d.username(), d.password(), d.poolSize(), d.lockTimeout()));
      }
    }

    if (config.kafka().embedded()) {
      EmbeddedKafka kafka = EmbeddedKafka.start(workingDir.resolve("kafka"), 0);
      own(kafka);
      bootstrapServers = kafka.bootstrapServers();
    } else {
      bootstrapServers = config.kafka().bootstrapServers().orElseThrow();
    }

    databases = new Databases(endpoints, registry);
    own(databases);
    startHealth(endpoints);
    TopicProvisioner.ensure(
        bootstrapServers,
        config.kafka().properties(),
        List.of(),
        topics().deadLetterTopics(),
        config.kafka().partitions(),
        config.kafka().replicationFactor());

    http.serve(registry, this::status, this::failure);
    lagGauges =
        ConsumerLagGauges.start(
            bootstrapServers,
            config.kafka().properties(),
            config.kafka().topicPrefix(),
            registry,
            clock);
    own(lagGauges);
    Map<String, String> urls = new LinkedHashMap<>();
    if (config.embeddedDatabases()) { // a configured URL may carry a password: not written out
      endpoints.forEach(e -> urls.put(e.name(), e.url()));
    }
    workingDir.publish(
        new RuntimeInfo(ProcessHandle.current().pid(), http.port(), bootstrapServers, urls));
  }

  private void startHealth(List<DatabaseEndpoint> endpoints) {
    Map<String, DataSource> sources = new LinkedHashMap<>();
    endpoints.forEach(e -> sources.put(e.name(), databases.unpooledSource(e.name())));
    health = new HealthMonitor(config.health(), sources, clock, registry);
    for (DatabaseEndpoint e : endpoints) {
      health.addIndicators(
          e.name(),
          StandardIndicators.forDatabase(
              config.health().thresholds(),
              captureSettings().slotName(e.name()),
              clock,
              latency(e.name())::p95Seconds));
    }
    health.start();
    own(health);
  }

  /** Recent sub-batch latencies of one database, shared by its sinks and its health monitor. */
  public LatencyWindow latency(String database) {
    return latency.computeIfAbsent(
        database, d -> new LatencyWindow(clock, LatencyWindow.DEFAULT_WINDOW));
  }

  public HealthMonitor health() {
    return health;
  }

  /** What a pipeline's sink needs from this process. */
  public Sink.Wiring sinkWiring() {
    return new Sink.Wiring(
        bootstrapServers,
        config.kafka().properties(),
        topics(),
        config.kafka().partitions(),
        config.kafka().replicationFactor(),
        health,
        databases::dataSource,
        this::latency,
        registry,
        clock);
  }

  /**
   * Starts a pipeline's sink; it stops after capture, with every other sink, when the runtime
   * closes.
   */
  public Sink startSink(
      Pipeline pipeline, String batchesTopic, BatchHandler handler, SinkSettings settings)
      throws InterruptedException {
    Sink sink = Sink.start(pipeline, batchesTopic, handler, settings, sinkWiring());
    sinks.put(pipeline, sink);
    own(sink);
    return sink;
  }

  /** The pipeline's sink in this process, if it started one. */
  public Optional<Sink> sink(Pipeline pipeline) {
    return Optional.ofNullable(sinks.get(pipeline));
  }

  /**
   * Starts a pipeline's sink on several batches topics, each with its own share of batches in
   * flight; it stops after capture, with every other sink, when the runtime closes.
   */
  public Sink startSink(
      Pipeline pipeline,
      List<BatchesTopic> batchesTopics,
      BatchHandler handler,
      SinkSettings settings)
      throws InterruptedException {
    Sink sink = Sink.start(pipeline, batchesTopics, handler, settings, sinkWiring());
    sinks.put(pipeline, sink);
    own(sink);
    return sink;
  }

  /** Creates topics that do not exist yet, with the configured partitions and replication. */
  public void ensureTopics(List<String> names) throws InterruptedException {
    TopicProvisioner.ensure(
        bootstrapServers,
        config.kafka().properties(),
        names,
        config.kafka().partitions(),
        config.kafka().replicationFactor());
  }

  /**
   * Starts a pipeline's Kafka Streams application (its state under the working directory); it stops
   * after capture and the sinks, with every other Streams application, when the runtime closes.
   * Returns once it runs.
   *
   * @param name the application's name within the pipeline, such as {@code batcher}
   * @param tick how often its wall-clock punctuators run
   */
  public StreamsApp startStreams(Pipeline pipeline, String name, Topology topology, Duration tick)
      throws InterruptedException {
    String id = topics().streamsApplication(pipeline, name);
    StreamsApp app =
        StreamsApp.start(
            id,
            topology,
            bootstrapServers,
            config.kafka().properties(),
            workingDir.resolve("streams"),
            STREAMS_COMMIT_INTERVAL,
            tick,
            config.kafka().replicationFactor());
    streamsApps.add(app);
    own(app);
    return app;
  }

  /**
   * Closes a pipeline's part with the runtime: after everything started later (a sink started after
   * it stops first), before everything started earlier (the sinks and Streams applications started
   * earlier may close with the first of their kind).
   */
  public void closeWith(AutoCloseable part) {
    own(part);
  }

  /** Where the status report gets its per-buffer lines from, once the buffers pipeline runs. */
  public void reportBuffers(java.util.function.Supplier<List<StatusReport.BufferStatus>> source) {
    this.bufferStatus = source;
  }

  /** Starts change capture for the routes the pipelines contribute; returns once it streams. */
  public void startCapture(List<CaptureRoute> routes) throws InterruptedException {
    if (routes.isEmpty()) {
      log.info("Nothing to capture: no pipeline declares captured tables");
      Capture.warnOfSlotsLeft(databases, captureSettings(), Set.of());
      captureSetUp = true;
      return;
    }
    synchronized (this) {
      if (closing) {
        throw new IllegalStateException("Spillway is stopping");
      }
      captureStarting = true;
    }
    try {
      Capture started =
          Capture.start(new CapturePlan(routes), databases, captureSettings(), captureStats, clock);
      capture = started;
      captureSetUp = true;
      // A stop that began meanwhile stops it here, gracefully: its positions stored, its slot
      // let go.
      own(started);
    } finally {
      synchronized (this) {
        captureStarting = false;
        notifyAll();
      }
    }
  }

  public CaptureSettings captureSettings() {
    var kafka = config.kafka();
    var c = config.capture();
    return new CaptureSettings(
        bootstrapServers,
        topics(),
        kafka.partitions(),
        kafka.replicationFactor(),
        kafka.properties(),
        c.pollInterval(),
        c.heartbeatInterval(),
        c.maxBatchSize(),
        c.offsetFlushInterval());
  }

  public Topics topics() {
    return new Topics(config.kafka().topicPrefix());
  }

  public SpillwayConfig config() {
    return config;
  }

  public String bootstrapServers() {
    return bootstrapServers;
  }

  public Databases databases() {
    return databases;
  }

  public PrometheusMeterRegistry registry() {
    return registry;
  }

  public int httpPort() {
    return http.port();
  }

  public CaptureStats captureStats() {
    return captureStats;
  }

  /**
   * The exception behind {@link #failure()} when it is a database's refusal to be captured as
   * configured (a take-over that found the slot another installation's): the process should then
   * exit with 2.
   */
  public Optional<RuntimeException> failureCause() {
    return capture == null ? Optional.empty() : capture.refusal().map(RuntimeException.class::cast);
  }

  /** Why a part stopped on its own, if one did; the process should then exit with 1. */
  public Optional<String> failure() {
    // A service manager's stop signals the embedded PostgreSQL too, which then ends as soon as
    // the pools let go of it: part of the stop, not a failure.
    if (!stopping && embeddedPostgres != null && embeddedPostgres.failure().isPresent()) {
      return embeddedPostgres.failure();
    }
    if (capture != null && capture.failure().isPresent()) {
      return capture.failure();
    }
    for (Sink sink : sinks.values()) {
      if (sink.failure().isPresent()) {
        return sink.failure();
      }
    }
    for (StreamsApp app : streamsApps) {
      if (app.failure().isPresent()) {
        return app.failure();
      }
    }
    return Optional.empty();
  }

  /** The report served at {@code /api/status}. Reads slot state from each database. */
  public StatusReport status() {
    List<StatusReport.DatabaseStatus> dbs = new ArrayList<>();
    Map<String, Instant> standingBy = capture == null ? Map.of() : capture.standingBy();
    // Each database's slots in turn: together they wait at most SLOTS_WAIT.
    // Whole milliseconds: a report says the wait.
    Duration slotsWait =
        Duration.ofMillis(SLOTS_WAIT.toMillis() / Math.max(1, databases.endpoints().size()));
    for (DatabaseEndpoint e : databases.endpoints()) {
      List<StatusReport.SlotStatus> slots = new ArrayList<>();
      String error = null;
      Optional<Sampled.Reading<List<SlotState>>> read =
          slotStates
              .computeIfAbsent(
                  e.name(),
                  name ->
                      new Sampled<>(
                          () -> SlotState.read(name, databases.dataSource(name)),
                          SLOTS_KEPT_FOR,
                          clock))
              .get(slotsWait);
      if (read.isEmpty()) {
        error =
            "no answer within "
                + DurationText.format(slotsWait)
                + " in the last "
                + SLOTS_KEPT_FOR.toSeconds()
                + " s (the database is down, or every connection of Spillway's pool is at work)";
      } else if (read.get().error() != null) {
        error = read.get().error();
      } else {
        for (SlotState s : read.get().value()) {
          slots.add(
              new StatusReport.SlotStatus(
                  s.slot(),
                  s.slot().equals(captureSettings().slotName(e.name())),
                  s.active(),
                  s.heldBytes(),
                  s.safeBytes(),
                  s.invalidation()));
        }
      }
      StatusReport.KafkaWait kafkaWait =
          captureStats
              .wait(e.name(), KAFKA_WAIT_SHOWN)
              .map(w -> new StatusReport.KafkaWait(w.since().toString(), w.reason()))
              .orElse(null);
      dbs.add(
          new StatusReport.DatabaseStatus(
              e.name(),
              DatabaseConfig.redacted(e.url()),
              config.embeddedDatabases(),
              slots,
              error,
              kafkaWait,
              standingBy.containsKey(e.name()) ? standingBy.get(e.name()).toString() : null));
    }
    List<StatusReport.CaptureCount> counts = new ArrayList<>();
    captureStats
        .snapshot()
        .forEach(
            c ->
                counts.add(
                    new StatusReport.CaptureCount(
                        c.database(),
                        c.table().toString(),
                        c.kind().name().toLowerCase(java.util.Locale.ROOT),
                        c.changes())));
    List<StatusReport.HealthStatus> healthStatus = new ArrayList<>();
    for (HealthMonitor.State h : health.states()) {
      healthStatus.add(
          new StatusReport.HealthStatus(
              h.database(),
              h.table() == null ? null : h.table().toString(),
              h.health().label(),
              h.health().reason()));
    }
    Optional<ConsumerLagGauges.Reading> lag =
        lagGauges == null ? Optional.empty() : lagGauges.latest();
    List<StatusReport.SinkStatus> sinkStatus = new ArrayList<>();
    sinks.forEach(
        (p, sink) ->
            sinkStatus.add(
                new StatusReport.SinkStatus(
                    p.id(),
                    sink.metrics().rowsCount(),
                    sink.metrics().requeuedCount(),
                    sink.metrics().delayedCount(),
                    sink.metrics().deadLetteredCount(),
                    sink.metrics().pausedPartitionCount())));
    return new StatusReport(
        ProcessHandle.current().pid(),
        startedAt.toString(),
        new StatusReport.KafkaStatus(bootstrapServers, config.kafka().embedded()),
        dbs,
        counts,
        !captureSetUp,
        healthStatus,
        sinkStatus,
        bufferStatus.get(),
        lag.map(l -> l.at().toString()).orElse(null),
        lag.map(r -> r.lags().stream().map(l -> StatusReport.LagStatus.of(l, r.at())).toList())
            .orElse(List.of()),
        failure().orElse(null),
        clock.instant().toString());
  }

  /** SIGINT/SIGTERM: the log says the stop began and ended, so a clean stop shows as one. */
  private void closeOnSignal() {
    log.info("Stopping on a signal: capture first, then the pipelines and what Spillway started");
    close();
    log.info("Stopped");
  }

  /**
   * Stops everything in reverse start order; safe to call twice. The JVM calls it on SIGINT or
   * SIGTERM.
   */
  @Override
  public void close() {
    stopping = true; // at once, though another stop holds the lock
    closeInOrder();
  }

  private synchronized void closeInOrder() {
    closing = true;
    // An embedded PostgreSQL still starting (a signal during start-up) would outlive the JVM, which
    // exits once this hook returns: wait for its start, whose own() then stops it at once, before
    // what was started earlier (the working directory's lock) is let go. A capture starting would
    // stream on until the JVM ends, its positions not stored: wait for it too, and stop it first.
    long until = System.nanoTime() + POSTGRES_START_WAIT.toNanos();
    if (postgresStarting) {
      log.info("Waiting for the embedded PostgreSQL being started, to stop it");
    }
    if (captureStarting) {
      log.info("Waiting for capture being started, to stop it");
    }
    while ((postgresStarting || captureStarting) && System.nanoTime() < until) {
      try {
        wait(Math.max(1, (until - System.nanoTime()) / 1_000_000));
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        break;
      }
    }
    try {
      Shutdown.inReverse(started, Set.of(Sink.class, StreamsApp.class));
    } finally {
      ShutdownHooks.remove(shutdownHook);
      closed.countDown();
    }
  }

  /**
   * Starts the embedded PostgreSQL, a process of its own that would outlive the JVM, and takes it;
   * {@link #close()} waits for a start under way.
   */
  private EmbeddedPostgresServer startPostgres(List<String> names) throws IOException {
    synchronized (this) {
      if (closing) {
        throw new IllegalStateException("Spillway is stopping");
      }
      postgresStarting = true;
    }
    try {
      EmbeddedPostgresServer server =
          EmbeddedPostgresServer.start(workingDir.resolve("postgres"), 0, names);
      if (!own(server)) {
        // Stopped already: start-up must not go on without the working directory.
        throw new IllegalStateException("Spillway is stopping");
      }
      return server;
    } finally {
      synchronized (this) {
        postgresStarting = false;
        notifyAll();
      }
    }
  }

  /**
   * Takes a started part to stop in reverse order on {@link #close()}; one started while closing (a
   * signal during start-up) is stopped at once, so nothing outlives the runtime.
   *
   * @return false when the part was stopped at once
   */
  private synchronized boolean own(AutoCloseable part) {
    if (closing) {
      Shutdown.stop(part);
      return false;
    }
    started.push(part);
    return true;
  }

  /** Waits up to {@code timeout} for {@link #close()} to finish; true once it has. */
  public boolean awaitClosed(java.time.Duration timeout) throws InterruptedException {
    return closed.await(timeout.toMillis(), TimeUnit.MILLISECONDS);
  }
}
