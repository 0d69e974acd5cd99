package dev.spillway.bench;

import dev.spillway.buffers.BufferPipeline;
import dev.spillway.buffers.BufferSettings;
import dev.spillway.buffers.HandlerSpec;
import dev.spillway.event.TableName;
import dev.spillway.jdbc.DatabaseEndpoint;
import dev.spillway.runtime.SpillwayRuntime;
import io.micrometer.core.instrument.distribution.HistogramSnapshot;
import io.micrometer.core.instrument.distribution.ValueAtPercentile;
import java.io.PrintWriter;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.function.ToDoubleFunction;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import javax.sql.DataSource;

/**
 * {@code bench buffers}: pgbench-style single-row inserts into a buffer table, first into a plain
 * table with nothing else running, then into a table drained by the source document's SKIP LOCKED
 * poller, then into a buffer table Spillway captures, batches and deletes with a no-op handler.
 * Reports insert throughput and latency, the backlog over time and insert → handled latency.
 */
public final class BufferBench {
  /**
   * One run's sizes.
   *
   * @param rate inserts per second of all clients together, each phase at the same rate; 0 for as
   *     fast as the database takes them
   * @param waits whether to sample what the inserts wait on ({@link InsertWaits})
   * @param separateCores whether to run the database and the clients on half of the CPUs and
   *     Spillway on the other ({@link CpuSplit})
   */
  public record Options(
      Duration duration,
      int clients,
      double rate,
      int batchSize,
      Duration maxWait,
      int maxInFlight,
      boolean waits,
      boolean separateCores) {
    boolean paced() {
      return rate > 0;
    }
  }

  /** How often {@code --waits} samples what the inserts wait on. */
  public static final long WAIT_SAMPLE_MILLIS = InsertWaits.EVERY_MILLIS;

  /** A paced phase more than this far below its rate did not keep the schedule. */
  private static final double KEPT_RATE = 0.97;

  private static final TableName PLAIN = new TableName("public", "bench_buffer_plain");
  private static final TableName POLLED = new TableName("public", "bench_buffer_polled");
  private static final TableName EVENTS = new TableName("public", "bench_buffer_events");
  private static final TableName WARM = new TableName("public", "bench_buffer_warm");
  private static final String BUFFER = "bench";
  private static final String WARM_BUFFER = "warm-up";
  private static final Duration SAMPLE_EVERY = Duration.ofSeconds(5);
  private static final Duration WARM_UP = Duration.ofSeconds(5);

  /**
   * A design's warm-up runs at least this long, then on until the JIT compilers have used less than
   * {@link #JIT_SETTLED} of a CPU over the last {@link #JIT_WINDOW} (looked at every {@link
   * #SAMPLE_EVERY}), at most {@link #DESIGN_WARM_UP_MOST}: Spillway's JVM holds Kafka, Debezium,
   * Streams and the sink, whose compiling on two busy cores goes on for a minute or more, a cost
   * paid once per start that a measurement of the running state should leave out.
   */
  private static final Duration DESIGN_WARM_UP = Duration.ofSeconds(20);

  private static final Duration DESIGN_WARM_UP_MOST = Duration.ofSeconds(150);
  private static final double JIT_SETTLED = 0.10;
  private static final Duration JIT_WINDOW = Duration.ofSeconds(15);

  private static final Duration DRAIN_LIMIT = Duration.ofMinutes(5);

  /**
   * Longer than any run, so Spillway's insert → handled percentiles and max hold every row the
   * measured buffer handled, over the whole measured phase and its drain, as the poller's samples
   * do. Micrometer keeps a timed row for two thirds of the window at least: with the production two
   * minutes, a phase and drain of more than 80 s could lose their start.
   */
  private static final Duration WHOLE_RUN = Duration.ofDays(1);

  /** How long after the drain the handled counters may take to count the last batch. */
  private static final Duration COUNTED_WITHIN = Duration.ofSeconds(2);

  private static final long POLLER_IDLE_MILLIS = 100;
  private static final int POLLER_STATEMENT_TIMEOUT_SECONDS = 60;

  /** WAL bytes and full-page images the server has written. */
  private static final String WAL = "SELECT wal_bytes::bigint, wal_fpi FROM pg_stat_wal";

  private final SpillwayRuntime runtime;
  private final PrintWriter out;
  private final DataSource ds;
  private final DatabaseEndpoint endpoint;
  private Optional<DatabaseCpu> databaseCpu = Optional.empty();
  private final PhaseCheckpoint checkpoint;

  /** What goes before the clients' command: nothing, or taskset onto the database's CPUs. */
  private List<String> clientsLauncher = List.of();

  public BufferBench(SpillwayRuntime runtime, PrintWriter out) {
    this.runtime = runtime;
    this.out = out;
    this.ds = runtime.databases().dataSource(SpillwayRuntime.MAIN);
    this.endpoint = runtime.databases().endpoint(SpillwayRuntime.MAIN);
    this.checkpoint =
        PhaseCheckpoint.of(
            ds,
            note -> {
              out.println("   " + note);
              out.flush();
            });
  }

  /**
   * How long a phase's load runs: {@code least}, then, when {@code untilJitSettled}, on until the
   * JIT compilers used less than {@link #JIT_SETTLED} of a CPU over the last {@link #JIT_WINDOW},
   * at most {@code most}.
   */
  private record Span(Duration least, Duration most, boolean untilJitSettled) {
    static Span of(Duration d) {
      return new Span(d, d, false);
    }
  }

  /**
   * What one loaded phase saw.
   *
   * @param drainSeconds from the stop sent to the clients until the table was first found empty (or
   *     the drain gave up)
   * @param databaseCpuSeconds CPU the database server used from the load's start until the table
   *     was drained; NaN when it cannot be read
   * @param walSenderCpuSeconds the part of it its WAL senders used; NaN when it cannot be read or a
   *     WAL sender ended during the phase
   * @param jitCpuSeconds CPU this process's JIT compilers used over the same time; NaN when it
   *     cannot be read
   * @param jitShareAtEnd the share of a CPU they used over the load's last {@link #JIT_WINDOW}
   * @param left rows left in the table when the drain ended (0 without a drainer)
   */
  private record Phase(
      InsertLoad.Result load,
      List<BacklogSample> backlog,
      double drainSeconds,
      double databaseCpuSeconds,
      double walSenderCpuSeconds,
      double processCpuSeconds,
      double jitCpuSeconds,
      double jitShareAtEnd,
      long left,
      Map<String, Long> waits,
      long walBytes,
      long walFullPages) {
    /** Whether the drainer emptied the table. */
    boolean drained() {
      return left == 0;
    }

    /** Database CPU milliseconds per 1,000 inserted rows. */
    double databaseCpuPerThousand() {
      return databaseCpuSeconds * 1e6 / load.inserts();
    }

    /** WAL sender CPU milliseconds per 1,000 inserted rows. */
    double walSenderCpuPerThousand() {
      return walSenderCpuSeconds * 1e6 / load.inserts();
    }

    /** Kilobytes of WAL the whole server wrote per 1,000 inserted rows. */
    double walKbPerThousand() {
      return walBytes / 1024.0 * 1000 / load.inserts();
    }

    /** Full-page images in that WAL per 1,000 inserted rows. */
    double walFullPagesPerThousand() {
      return walFullPages * 1000.0 / load.inserts();
    }

    /** The clients' and this process's CPU milliseconds per 1,000 inserted rows. */
    double processCpuPerThousand() {
      return processCpuSeconds * 1e6 / load.inserts();
    }

    /** This process's JIT compilers' CPU milliseconds per 1,000 inserted rows. */
    double jitCpuPerThousand() {
      return jitCpuSeconds * 1e6 / load.inserts();
    }
  }

  public void run(Options o) throws Exception {
    String columns =
        " (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, contact_id bigint NOT NULL,"
            + " activity text NOT NULL, created_at timestamptz NOT NULL DEFAULT clock_timestamp()";
    BenchSql.exec(
        ds,
        "DROP TABLE IF EXISTS "
            + PLAIN.quoted()
            + ", "
            + POLLED.quoted()
            + ", "
            + EVENTS.quoted()
            + ", "
            + WARM.quoted(),
        "CREATE TABLE " + PLAIN.quoted() + columns + ")",
        "CREATE TABLE " + EVENTS.quoted() + columns + ")",
        "CREATE TABLE " + WARM.quoted() + columns + ")",
        "CREATE TABLE " + POLLED.quoted() + columns + ", group_id uuid)",
        // The document's indexes: by group for the events job, unclaimed rows for the claim job.
        "CREATE INDEX ON " + POLLED.quoted() + " (group_id)",
        "CREATE INDEX ON " + POLLED.quoted() + " (id) WHERE group_id IS NULL");
    out.printf(
        "Single-row inserts, %d clients, %s, %d s per phase; batches of %d within %d ms, %d in"
            + " flight%n",
        o.clients(),
        o.paced()
            ? String.format("paced at %,.0f inserts/s in all", o.rate())
            : "as fast as they can",
        o.duration().toSeconds(),
        o.batchSize(),
        o.maxWait().toMillis(),
        o.maxInFlight());
    out.flush();

    databaseCpu = DatabaseCpu.of(ds);
    if (o.separateCores()) {
      separateCores();
    }

    // The clients' process warms itself up; this warms the database for the plain phase, which has
    // no design warm-up of its own.
    try (InsertLoad warmUp =
        new InsertLoad(endpoint, insert(PLAIN), o.clients(), o.rate(), clientsLauncher)) {
      warmUp.start();
      Thread.sleep(WARM_UP.toMillis());
      warmUp.stop();
    }
    BenchSql.exec(ds, "TRUNCATE " + PLAIN.quoted());

    out.println("1) Plain inserts, nothing else running");
    out.flush();
    checkpoint.beforePhase();
    Phase plainPhase = loaded(PLAIN, o, Span.of(o.duration()), false);
    InsertLoad.Result plain = plainPhase.load();
    // Each phase's table goes once measured: the autovacuum its rows call for (inserted ones get
    // one too) would otherwise land in a later phase and be charged to that design.
    BenchSql.exec(ds, "TRUNCATE " + PLAIN.quoted());

    out.printf(
        "Warm-up before each design: the same load, not measured, for %d s and on until the JIT"
            + " compilers use less than %.0f%% of a CPU over %d s (at most %d s)%n",
        DESIGN_WARM_UP.toSeconds(),
        JIT_SETTLED * 100,
        JIT_WINDOW.toSeconds(),
        DESIGN_WARM_UP_MOST.toSeconds());
    out.println(
        "2) The document's design: SKIP LOCKED claim jobs with a group id, then delete by group");
    out.flush();
    SkipLockedPoller warmPoller = poller(o);
    warmPoller.start();
    warmUp(POLLED, o);
    warmPoller.stop();
    // As the plain table: the warm-up's dead tuples, index entries and pending autovacuum are not
    // the measured phase's to carry. Spillway's measured buffer has a table no warm-up touched,
    // and its warm-up's table is vacuumed before it.
    BenchSql.exec(ds, "TRUNCATE " + POLLED.quoted());
    SkipLockedPoller poller = poller(o);
    poller.start();
    checkpoint.beforePhase();
    Phase polled = loaded(POLLED, o, Span.of(o.duration()), true);
    Samples pollerLatency = poller.stop();
    BenchSql.exec(ds, "TRUNCATE " + POLLED.quoted());

    // Spillway starts only now: once its replication slot exists, the server decodes all its WAL,
    // the poller's included, whatever the publication holds. A second buffer, on its own table,
    // takes the warm-up load, so the measured buffer's figures hold only the measured phase.
    out.println("3) Spillway: capture, Kafka Streams batches, sink with a no-op handler");
    out.flush();
    BufferPipeline pipeline =
        BufferPipeline.of(List.of(buffer(BUFFER, EVENTS, o), buffer(WARM_BUFFER, WARM, o)))
            .withPercentileWindow(WHOLE_RUN);
    pipeline.start(runtime, Clock.systemUTC());
    runtime.startCapture(pipeline.routes(runtime.topics()));
    warmUp(WARM, o);
    // Not truncated, as its table is published: vacuumed, so its warm-up's dead rows are not
    // the measured phase's autovacuum to do.
    BenchSql.exec(ds, "VACUUM " + WARM.quoted());
    checkpoint.beforePhase();
    Phase spillway = loaded(EVENTS, o, Span.of(o.duration()), true);
    // The last batch's timings are recorded with its counts, a moment after its delete: once all
    // are counted, the timer has them too.
    HandledOnce.countedBy(
        () ->
            (long)
                (bufferCounter("spillway_buffer_events_handled")
                    + bufferCounter("spillway_buffer_dead_lettered_events")),
        spillway.load().inserts(),
        COUNTED_WITHIN);
    HistogramSnapshot handled =
        runtime
            .registry()
            .get("spillway_buffer_insert_to_handled")
            .tag("buffer", BUFFER)
            .timer()
            .takeSnapshot();
    HandledOnce spillwayOnce =
        new HandledOnce(
            spillway.load().inserts(),
            (long) bufferCounter("spillway_buffer_events_handled"),
            (long) bufferCounter("spillway_buffer_dead_lettered_events"),
            spillway.left());
    HandledOnce pollerOnce =
        new HandledOnce(polled.load().inserts(), pollerLatency.size(), 0, polled.left());

    out.println();
    List<Phase> designs = List.of(plainPhase, polled, spillway);
    printPerDesign("insert throughput", "tx/s", p -> p.load().tps(), designs);
    if (o.paced()) {
      out.println(
          "   (paced: an insert's latency runs from its scheduled start, waiting included)");
    }
    printPerDesign("insert latency mean", "ms", p -> p.load().latency().mean() / 1000, designs);
    printPerDesign("insert latency p50", "ms", p -> p.load().latency().p50() / 1000.0, designs);
    printPerDesign("insert latency p99", "ms", p -> p.load().latency().p99() / 1000.0, designs);
    if (o.waits()) {
      printWaits(designs);
    }
    if (databaseCpu.isPresent()) {
      printPerDesign(
          "database CPU per 1,000 inserts, load and drain",
          "ms",
          Phase::databaseCpuPerThousand,
          designs);
      if (Double.isNaN(spillway.walSenderCpuSeconds())) {
        out.println(
            "   of which Spillway's WAL sender (logical decoding): not known, a WAL sender ended"
                + " during the phase");
      } else {
        out.printf(
            "   of which Spillway's WAL sender (logical decoding) %11.2f ms per 1,000 inserts%n",
            spillway.walSenderCpuPerThousand());
      }
    }
    printPerDesign(
        "WAL written per 1,000 inserts, load and drain", "kB", Phase::walKbPerThousand, designs);
    printPerDesign(
        "  of which full-page images, per 1,000 inserts",
        "pages",
        Phase::walFullPagesPerThousand,
        designs);
    new Comparison("benchmark processes' CPU per 1,000 inserts, load and drain", "ms")
        .add("plain table: clients, idle broker", plainPhase.processCpuPerThousand())
        .add("clients, idle broker and the poller", polled.processCpuPerThousand())
        .add("clients and Spillway (Kafka included)", spillway.processCpuPerThousand())
        .print(out);
    if (!Double.isNaN(spillway.jitCpuSeconds())) {
      out.println(
          jitCpuLine(
              plainPhase.jitCpuPerThousand(),
              polled.jitCpuPerThousand(),
              spillway.jitCpuPerThousand()));
    }
    double spillP50 = percentile(handled, 0.5);
    double spillP99 = percentile(handled, 0.99);
    new Comparison("insert -> handled p50", "ms")
        .add("SKIP LOCKED poller", pollerLatency.percentile(50) / 1000.0)
        .add("Spillway", spillP50)
        .print(out);
    new Comparison("insert -> handled p99", "ms")
        .add("SKIP LOCKED poller", pollerLatency.percentile(99) / 1000.0)
        .add("Spillway", spillP99)
        .print(out);
    printBacklog("SKIP LOCKED poller", polled);
    printBacklog("Spillway", spillway);
    out.printf(
        "   rows handled by Spillway: %,d (insert -> handled max %.0f ms)%n",
        handled.count(), handled.max(TimeUnit.MILLISECONDS));

    // As fast as they can, the cost is the throughput lost; at a fixed rate, the latency added.
    double cost =
        o.paced()
            ? spillway.load().latency().mean() / plain.latency().mean()
            : plain.tps() / spillway.load().tps();
    String costMeasure =
        o.paced()
            ? String.format(
                "mean insert latency with Spillway / plain, at %,.0f inserts/s", o.rate())
            : "plain tx/s / tx/s with Spillway";
    List<String> behind = new ArrayList<>();
    if (o.paced()) {
      if (plain.tps() < KEPT_RATE * o.rate()) {
        behind.add(String.format("plain %,.0f/s", plain.tps()));
      }
      if (spillway.load().tps() < KEPT_RATE * o.rate()) {
        behind.add(String.format("Spillway %,.0f/s", spillway.load().tps()));
      }
    }
    out.printf("Bars:%n");
    Optional<Double> growth = growth(spillway.backlog());
    double allowed = allowedGrowth(o.batchSize(), spillway.load().tps(), o.maxWait());
    out.printf(
        "   backlog bounded (drained, and its trend over the run growing by no more than one batch"
            + " and one max-wait of inserts, %,.0f rows): %s%n",
        allowed,
        growth.isEmpty()
            ? "not judged (fewer than " + TREND_SAMPLES + " backlog samples: a longer --duration)"
            : String.format(
                "grew %,.0f rows, %s",
                growth.get(), spillway.drained() && growth.get() <= allowed ? "met" : "NOT met"));
    out.printf(
        "   insert -> handled p99 <= 1 s: %.0f ms, %s%n",
        spillP99,
        spillway.drained() && handled.count() > 0 && spillP99 <= 1000 ? "met" : "NOT met");
    out.printf(
        "   insert cost <= 1.05x a plain insert: %.3fx (%s), %s%n",
        cost,
        costMeasure,
        !behind.isEmpty()
            ? "NOT met: the clients fell behind the rate (" + String.join(", ", behind) + ")"
            : cost <= 1.05 ? "met" : "NOT met");
    out.println("   " + spillwayOnce.line("Spillway"));
    out.println("   " + pollerOnce.line("the SKIP LOCKED poller"));
    out.flush();
  }

  /** A counter of the measured buffer: it takes rows of the measured phase only. */
  private double bufferCounter(String name) {
    return runtime.registry().get(name).tag("buffer", BUFFER).counter().count();
  }

  /**
   * Refuses {@code --separate-cores} on a machine where the CPUs cannot be split, before a run
   * deletes the last one's data and starts anything.
   *
   * @throws IllegalArgumentException saying why
   */
  public static void checkSeparateCores() throws InterruptedException {
    CpuSplit.requireSplittable(CpuSplit.allowed(), "taskset");
  }

  /**
   * Puts the database server and (through their launcher) the clients on one half of the CPUs and
   * this process on the other, for every phase, so Spillway's own CPU is not taken from the
   * database's: what its insert cost would be with Spillway and Kafka on a machine of their own.
   */
  private void separateCores() throws Exception {
    CpuSplit split = CpuSplit.halves(CpuSplit.allowed());
    DatabaseCpu server =
        databaseCpu.orElseThrow(
            () ->
                new IllegalStateException(
                    "Separate cores need the embedded database's processes, which are not"
                        + " readable here."));
    split.pinDatabase(server.postmaster());
    split.pinThisProcess();
    clientsLauncher = split.onDatabaseCpus();
    out.printf(
        "Separate cores: the database and the clients on CPU %s, Spillway and its Kafka on CPU"
            + " %s, every phase%n",
        split.database(), split.spillway());
    out.flush();
  }

  /** One figure of the plain, poller and Spillway phases, each as a ratio to the plain one. */
  private void printPerDesign(
      String measure, String unit, ToDoubleFunction<Phase> figure, List<Phase> designs) {
    new Comparison(measure, unit)
        .add("plain table, nothing running", figure.applyAsDouble(designs.get(0)))
        .add("SKIP LOCKED poller draining it", figure.applyAsDouble(designs.get(1)))
        .add("Spillway draining it", figure.applyAsDouble(designs.get(2)))
        .print(out);
  }

  /**
   * What this process's JIT compilers used in each phase: in the plain one, with nothing of the
   * benchmark's running, what they use anyway.
   */
  static String jitCpuLine(double plain, double poller, double spillway) {
    return String.format(
        "   of which this process's JIT compilers: plain %.2f, poller %.2f, Spillway %.2f ms per"
            + " 1,000 inserts",
        plain, poller, spillway);
  }

  /** Each wait event's share of the sampled inserts, for events at 1% or more in some phase. */
  private void printWaits(List<Phase> designs) {
    List<Map<String, Long>> phases = designs.stream().map(Phase::waits).toList();
    List<Long> totals =
        phases.stream().map(w -> w.values().stream().mapToLong(Long::longValue).sum()).toList();
    out.printf(
        "   what inserts waited on (pg_stat_activity every %d ms; %s: running or runnable)%n",
        InsertWaits.EVERY_MILLIS, InsertWaits.ON_CPU);
    out.printf("   %-44s %8s %8s %8s%n", "share of samples", "plain", "poller", "Spillway");
    phases.stream()
        .flatMap(w -> w.keySet().stream())
        .distinct()
        .map(event -> new WaitShares(event, phases, totals))
        .filter(w -> w.max() >= 1)
        .sorted(Comparator.comparingDouble((WaitShares w) -> -w.percent()[0]))
        .forEach(
            w ->
                out.printf(
                    "   %-44s %7.0f%% %7.0f%% %7.0f%%%n",
                    w.event(), w.percent()[0], w.percent()[1], w.percent()[2]));
    out.printf(
        "   %-44s %8d %8d %8d%n",
        "samples of active inserts", totals.get(0), totals.get(1), totals.get(2));
  }

  /** One wait event's share of each phase's samples, in percent. */
  private record WaitShares(String event, double[] percent) {
    WaitShares(String event, List<Map<String, Long>> phases, List<Long> totals) {
      this(
          event,
          IntStream.range(0, phases.size())
              .mapToDouble(
                  i ->
                      totals.get(i) == 0
                          ? 0
                          : 100.0 * phases.get(i).getOrDefault(event, 0L) / totals.get(i))
              .toArray());
    }

    double max() {
      return Arrays.stream(percent).max().orElse(0);
    }
  }

  private static BufferSettings buffer(String name, TableName table, Options o) {
    return BufferSettings.of(
            name, table, SpillwayRuntime.MAIN, new HandlerSpec.JavaClass(NoopBulkHandler.class))
        .withBatching(o.batchSize(), o.maxWait())
        .withConcurrency(o.maxInFlight(), null);
  }

  private SkipLockedPoller poller(Options o) {
    return new SkipLockedPoller(
        ds,
        POLLED.quoted(),
        o.batchSize(),
        o.maxInFlight(),
        POLLER_IDLE_MILLIS,
        POLLER_STATEMENT_TIMEOUT_SECONDS);
  }

  private static String insert(TableName t) {
    return "INSERT INTO " + t.quoted() + " (contact_id, activity) VALUES (?, 'call')";
  }

  /**
   * The load of a design's warm-up ({@link #DESIGN_WARM_UP}), drained; prints how long the load ran
   * and what the JIT compilers used in its last {@link #JIT_WINDOW}.
   */
  private void warmUp(TableName table, Options o) throws Exception {
    Phase p = loaded(table, o, new Span(DESIGN_WARM_UP, DESIGN_WARM_UP_MOST, true), true);
    out.printf(
        "   warm-up load ran %.0f s%s%n",
        p.load().seconds(),
        Double.isNaN(p.jitCpuSeconds())
            ? " (the JIT compilers' CPU is not readable here)"
            : String.format(
                "; the JIT compilers used %.0f%% of a CPU in its last %d s",
                p.jitShareAtEnd() * 100, JIT_WINDOW.toSeconds()));
    out.flush();
  }

  /**
   * Runs the insert load on an empty table; when {@code drainer} (something drains the table), it
   * samples the backlog and then waits for the table to be empty again.
   */
  private Phase loaded(TableName table, Options o, Span span, boolean drainer) throws Exception {
    List<BacklogSample> backlog = new ArrayList<>();
    String count = "SELECT count(*) FROM " + table.quoted();
    String any = "SELECT count(*) FROM (SELECT FROM " + table.quoted() + " LIMIT 1) t";
    Optional<InsertWaits> waits =
        o.waits()
            ? Optional.of(new InsertWaits(ds, "INSERT INTO " + table.quoted() + " "))
            : Optional.empty();
    double cpuBefore;
    Optional<DatabaseCpu.WalSenders> walSendersBefore;
    double processBefore;
    Optional<JitCpu> jit;
    double jitShare = Double.NaN;
    long[] walBefore;
    long stopSignalled;
    InsertLoad.Result result;
    try (InsertLoad load =
        new InsertLoad(endpoint, insert(table), o.clients(), o.rate(), clientsLauncher)) {
      load.start(); // returns once its clients insert, their process warmed up
      waits.ifPresent(InsertWaits::start);
      cpuBefore = databaseCpu.map(DatabaseCpu::seconds).orElse(Double.NaN);
      walSendersBefore = databaseCpu.map(DatabaseCpu::walSenders);
      processBefore = ProcessCpu.seconds();
      jit = JitCpu.start();
      walBefore = BenchSql.row(ds, WAL);
      long started = System.nanoTime();
      long end = started + span.least().toNanos();
      long most = started + span.most().toNanos();
      while (true) {
        Thread.sleep(
            Math.min(SAMPLE_EVERY.toMillis(), Math.max(1, (end - System.nanoTime()) / 1_000_000)));
        if (drainer) {
          backlog.add(
              new BacklogSample((System.nanoTime() - started) / 1e9, BenchSql.single(ds, count)));
        }
        // Looked at every sample, so a compiler thread that ends is counted up to a sample before.
        jitShare = jit.map(j -> j.shareOver(JIT_WINDOW)).orElse(Double.NaN);
        if (System.nanoTime() >= end) {
          boolean compiling = span.untilJitSettled() && jitShare >= JIT_SETTLED;
          if (System.nanoTime() >= most || !compiling) {
            break;
          }
          end = Math.min(most, System.nanoTime() + SAMPLE_EVERY.toNanos());
        }
      }
      // The drain time runs from here: the load ends once its clients hear of the stop.
      stopSignalled = System.nanoTime();
      result = load.stop();
    } finally {
      waits.ifPresent(InsertWaits::close);
    }
    Map<String, Long> waited = waits.isPresent() ? waits.get().stop() : Map.of();
    long drainDeadline = stopSignalled + DRAIN_LIMIT.toNanos();
    while (drainer && BenchSql.single(ds, any) > 0 && System.nanoTime() < drainDeadline) {
      Thread.sleep(20);
    }
    long drainEnded = System.nanoTime();
    double cpu = databaseCpu.map(DatabaseCpu::seconds).orElse(Double.NaN) - cpuBefore;
    double walSender =
        walSendersBefore
            .flatMap(
                before ->
                    databaseCpu.map(c -> c.walSenders().secondsSince(before).orElse(Double.NaN)))
            .orElse(Double.NaN);
    double process = ProcessCpu.seconds() - processBefore + result.cpuSeconds();
    double jitSeconds = jit.map(JitCpu::seconds).orElse(Double.NaN);
    long[] walAfter = BenchSql.row(ds, WAL);
    long left = drainer ? BenchSql.single(ds, count) : 0;
    if (left > 0) {
      out.printf(
          "   NOT drained: %,d rows left in %s %d s after the load stopped%n",
          left, table, DRAIN_LIMIT.toSeconds());
      out.flush();
    }
    return new Phase(
        result,
        backlog,
        (drainEnded - stopSignalled) / 1e9,
        cpu,
        walSender,
        process,
        jitSeconds,
        jitShare,
        left,
        waited,
        walAfter[0] - walBefore[0],
        walAfter[1] - walBefore[1]);
  }

  private void printBacklog(String name, Phase p) {
    out.printf(
        "   backlog of %s (rows in the table every %d s, and at the load's end): %s; max %,d;"
            + " drained %.1f s after the load stopped%n",
        name,
        SAMPLE_EVERY.toSeconds(),
        p.backlog().stream()
            .map(b -> String.format("%,d", b.rows()))
            .collect(Collectors.joining(" ")),
        p.backlog().stream().mapToLong(BacklogSample::rows).max().orElse(0),
        p.drainSeconds());
  }

  /**
   * Rows in the buffer table {@code seconds} into the load: every {@link #SAMPLE_EVERY}, the last
   * at its end, however long after the one before.
   */
  record BacklogSample(double seconds, long rows) {}

  /** The fewest backlog samples a trend is judged from. */
  static final int TREND_SAMPLES = 4;

  /**
   * How much the backlog grew over the run as its trend says: the least-squares slope of the
   * samples over their times, times the span they cover; empty with fewer than {@link
   * #TREND_SAMPLES}. A drain that keeps up grows nothing however the backlog wavers; one that falls
   * behind by a share of the inserts grows by that share of them.
   */
  static Optional<Double> growth(List<BacklogSample> backlog) {
    int n = backlog.size();
    if (n < TREND_SAMPLES) {
      return Optional.empty();
    }
    double meanX = backlog.stream().mapToDouble(BacklogSample::seconds).average().orElse(0);
    double meanY = backlog.stream().mapToLong(BacklogSample::rows).average().orElse(0);
    double covariance = 0;
    double variance = 0;
    for (BacklogSample b : backlog) {
      covariance += (b.seconds() - meanX) * (b.rows() - meanY);
      variance += (b.seconds() - meanX) * (b.seconds() - meanX);
    }
    double span = backlog.get(n - 1).seconds() - backlog.get(0).seconds();
    return Optional.of(covariance / variance * span);
  }

  /**
   * The most the backlog may grow over the run for it to be bounded: what one batch and one {@code
   * maxWait} of inserts at the phase's rate leave waiting. More is a drain falling behind.
   */
  static double allowedGrowth(int batchSize, double insertsPerSecond, Duration maxWait) {
    return batchSize + insertsPerSecond * maxWait.toMillis() / 1000.0;
  }

  private static double percentile(HistogramSnapshot s, double p) {
    for (ValueAtPercentile v : s.percentileValues()) {
      if (v.percentile() == p) {
        return v.value(TimeUnit.MILLISECONDS);
      }
    }
    return Double.NaN;
  }
}
