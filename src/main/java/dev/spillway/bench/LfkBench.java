package dev.spillway.bench;

import dev.spillway.event.Pipeline;
import dev.spillway.event.TableName;
import dev.spillway.health.Health;
import dev.spillway.lfk.CheckedKey;
import dev.spillway.lfk.LfkPipeline;
import dev.spillway.lfk.LfkSettings;
import dev.spillway.lfk.LooseForeignKey;
import dev.spillway.ops.TopicTail;
import dev.spillway.runtime.SpillwayRuntime;
import dev.spillway.sink.Sink;
import dev.spillway.sink.SinkSettings;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Timer;
import java.io.PrintWriter;
import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;

/**
 * {@code bench lfk}: the same parents and children, freshly loaded each time, cleaned three ways in
 * one run — native {@code ON DELETE CASCADE}, a server-side PL/pgSQL procedure deleting {@code
 * LIMIT 1000 … SKIP LOCKED} batches with a COMMIT each, and Spillway's loose-foreign-key pipeline
 * (capture → batcher → cleanup sink) — timed from the parent {@code DELETE}'s commit until the last
 * child is gone. Then, optionally, Spillway's cleanup once more beside a foreground probe.
 */
public final class LfkBench {
  /**
   * Sizes of one run, and the loose-foreign-key settings Spillway runs with (GitLab's defaults
   * unless changed for an experiment).
   *
   * @param probe whether to run the foreground probe phase after the timed comparison
   * @param clients foreground probe clients
   * @param poll how often the watcher asks whether any child is left
   */
  public record Options(
      int parents,
      int children,
      boolean probe,
      int clients,
      Duration poll,
      int batchSize,
      Duration maxWait,
      int deleteLimit,
      long maxDeletesPerRun,
      Optional<Duration> sinkPollTimeout) {}

  /** A parent table and its child table, with the child's index on the parent id. */
  private record Tables(TableName parent, TableName child, String index) {}

  /** The tables of the timed comparison. */
  private static final Tables TIMED =
      new Tables(
          new TableName("public", "bench_lfk_parent"),
          new TableName("public", "bench_lfk_child"),
          "bench_lfk_child_parent_id");

  /**
   * The tables of the probe phase, loaded before capture starts: rows loaded while capture runs
   * make the capture slot lag and Spillway's health throttle its own cleanup for minutes.
   */
  private static final Tables PROBED =
      new Tables(
          new TableName("public", "bench_lfk_probe_parent"),
          new TableName("public", "bench_lfk_probe_child"),
          "bench_lfk_probe_child_parent_id");

  private static final String PROCEDURE = "public.bench_lfk_cleanup";

  /** The procedure's statement size: the baseline the bar is defined against. */
  private static final int PROCEDURE_LIMIT = 1_000;

  private static final Duration PROBE = Duration.ofSeconds(5);

  /** The least of the cleanup, from its first child deleted, that the probe is compared over. */
  private static final Duration MIN_PROBED = Duration.ofSeconds(1);

  private static final Duration TIMEOUT = Duration.ofMinutes(15);

  /** The probe phase reports a cleanup still running after this instead of waiting it out. */
  private static final Duration PROBE_TIMEOUT = Duration.ofMinutes(3);

  private final SpillwayRuntime runtime;
  private final PrintWriter out;

  public LfkBench(SpillwayRuntime runtime, PrintWriter out) {
    this.runtime = runtime;
    this.out = out;
  }

  /**
   * What watching one Spillway cleanup saw. Times are seconds after the parent {@code DELETE}'s
   * commit, negative when the moment was not seen.
   */
  private record Watch(
      double gone,
      double deletesInKafka,
      double firstBatch,
      double firstDeletion,
      int polls,
      double pollMillis,
      int unhealthyPolls,
      String unhealthyReason,
      double firstUnhealthy,
      long rowsLeftWhenUnhealthy,
      double stalled) {}

  /** Counters of the cleanup sink, read before and after a cleanup. */
  private record SinkCounts(
      long rows, long statements, double statementSeconds, long done, long limitReached) {}

  public void run(Options o) throws Exception {
    DataSource ds = runtime.databases().dataSource(SpillwayRuntime.MAIN);
    out.printf(
        "%,d parents, %,d children (%,d each, spread over the table), PostgreSQL %s%n",
        o.parents(), o.children(), o.children() / o.parents(), serverVersion(ds));

    out.printf("1) Native ON DELETE CASCADE: DELETE FROM parent%n");
    out.flush();
    load(ds, TIMED, o, true);
    long start = System.nanoTime();
    BenchSql.exec(ds, "DELETE FROM " + TIMED.parent().quoted());
    double cascade = (System.nanoTime() - start) / 1e9;
    requireEmpty(ds, TIMED, "ON DELETE CASCADE");
    out.printf("   %.2f s%n", cascade);

    out.printf(
        "2) PL/pgSQL procedure: DELETE FROM parent, then LIMIT %,d ... FOR UPDATE SKIP LOCKED"
            + " with a COMMIT per batch%n",
        PROCEDURE_LIMIT);
    out.flush();
    load(ds, TIMED, o, false);
    createProcedure(ds, TIMED);
    double procedure = procedure(ds, TIMED);
    requireEmpty(ds, TIMED, "the procedure");
    out.printf("   %.2f s from the parent DELETE's commit%n", procedure);

    LfkSettings settings = settings(o);
    out.printf(
        "3) Spillway: capture -> batcher (batch-size %,d, max-wait %d ms) -> cleanup sink"
            + " (delete-limit %,d, max-deletes-per-run %,d, max-runtime-per-run %d s,"
            + " poll-timeout %d ms)%n",
        settings.batchSize(),
        settings.maxWait().toMillis(),
        settings.deleteLimit(),
        settings.maxDeletesPerRun(),
        settings.sink().maxRuntimePerRun().toSeconds(),
        settings.sink().pollTimeout().toMillis());
    out.flush();
    load(ds, TIMED, o, false);
    // One parent and child outside the measured ids, cleaned before the clock starts, so the
    // measure excludes consumer group joins and first-use costs.
    BenchSql.exec(
        ds,
        "INSERT INTO " + TIMED.parent().quoted() + " VALUES (0)",
        "INSERT INTO " + TIMED.child().quoted() + " VALUES (0, 0)");
    List<CheckedKey> keys = new ArrayList<>(List.of(key(TIMED)));
    ForegroundProbe probe = new ForegroundProbe(ds, o.clients(), 10_000);
    if (o.probe()) {
      load(ds, PROBED, o, false);
      probe.prepare();
      keys.add(key(PROBED));
    }
    LfkPipeline pipeline = LfkPipeline.start(runtime, settings, keys);
    runtime.startCapture(pipeline.routes(runtime.topics()));
    Sink sink = runtime.sink(Pipeline.LFK).orElseThrow();
    warmUp(ds, TIMED);
    Healthy.await(runtime, TIMED.child(), "the child table", out);

    SinkCounts before = counts(sink);
    Watch spillway = deleteAndWatch(ds, TIMED, o, TIMEOUT, () -> {});
    SinkCounts after = counts(sink);
    if (spillway.gone() < 0) {
      throw new IllegalStateException(
          "Children were left after " + TIMEOUT.toMinutes() + " minutes of Spillway's cleanup.");
    }
    out.printf(
        "   %.2f s from the parent DELETE's commit to the last child gone (polled every %d ms;"
            + " %d polls, %.1f ms each)%n",
        spillway.gone(), o.poll().toMillis(), spillway.polls(), spillway.pollMillis());
    printBreakdown(spillway, before, after, o);

    Comparison times =
        new Comparison("commit -> last child gone", "s")
            .add("PL/pgSQL procedure (LIMIT 1000 SKIP LOCKED)", procedure)
            .add("native ON DELETE CASCADE (statement)", cascade)
            .add("Spillway loose foreign keys", spillway.gone());
    out.println("Summary");
    times.print(out);
    double againstProcedure = spillway.gone() / procedure;
    out.printf(
        "   Spillway / procedure %.2fx, Spillway / CASCADE %.2fx; bar <= 1.5x the procedure: %s%n",
        againstProcedure,
        spillway.gone() / cascade,
        againstProcedure <= 1.5 ? "bar met" : "NOT met");
    out.flush();

    if (o.probe()) {
      // The timed cleanup left its tables full of dead rows; their autovacuum would land in the
      // probe's phases and be charged to whichever it hits.
      BenchSql.exec(ds, "VACUUM " + TIMED.parent().quoted(), "VACUUM " + TIMED.child().quoted());
      probePhase(ds, o, sink, probe);
    }
  }

  private void printBreakdown(Watch w, SinkCounts before, SinkCounts after, Options o) {
    long statements = after.statements() - before.statements();
    double inStatements = after.statementSeconds() - before.statementSeconds();
    out.printf(
        "   commit -> all %,d deletes in Kafka %s; -> first cleanup batch in Kafka %s;"
            + " -> first child deleted %s%n",
        o.parents(),
        seconds(w.deletesInKafka()),
        seconds(w.firstBatch()),
        seconds(w.firstDeletion()));
    out.printf(
        "   cleanup runs: %d done, %d ended at a per-run limit (re-queued); %,d rows in %,d"
            + " statements, %.1f ms each on average, %.2f s in statements (%.0f%% of the time)%n",
        after.done() - before.done(),
        after.limitReached() - before.limitReached(),
        after.rows() - before.rows(),
        statements,
        statements == 0 ? 0 : inStatements * 1000 / statements,
        inStatements,
        w.gone() > 0 ? inStatements / w.gone() * 100 : 0);
    out.printf(
        "   no statement finished in %.2f s of poll intervals after the first deletion (pauses,"
            + " re-queues, waits for batches)%n",
        w.stalled());
    out.printf(
        "   health of the child table not NORMAL in %d of %d polls%s%n",
        w.unhealthyPolls(),
        w.polls(),
        w.unhealthyPolls() == 0
            ? ""
            : String.format(
                " from %.2f s on, with about %,d children left (%s)",
                w.firstUnhealthy(), w.rowsLeftWhenUnhealthy(), w.unhealthyReason()));
    out.flush();
  }

  private static String seconds(double s) {
    return s < 0 ? "not seen" : String.format("%.2f s", s);
  }

  /**
   * Spillway's cleanup again, of the same rows in the second pair of tables, with the foreground
   * probe beside it.
   */
  private void probePhase(DataSource ds, Options o, Sink sink, ForegroundProbe probe)
      throws Exception {
    out.printf(
        "4) Foreground probe alone, %d clients, %d s (pipeline running, idle)%n",
        o.clients(), PROBE.toSeconds());
    out.flush();
    probe.start();
    Thread.sleep(PROBE.toMillis());
    ForegroundProbe.Result baseline = probe.stop();

    out.printf(
        "5) Spillway's cleanup again, of the same rows in a second pair of tables loaded before"
            + " capture started, with the probe%n");
    out.flush();
    Healthy.await(runtime, PROBED.child(), "the child table", out);
    SinkCounts before = counts(sink);
    // From the first child deleted: the wait for capture and the first batch is no cleanup.
    Watch w = deleteAndWatch(ds, PROBED, o, PROBE_TIMEOUT, probe::start);
    if (w.firstDeletion() < 0) { // the probe never started
      out.printf(
          "   no child deleted %d min after the parent DELETE's commit: nothing to probe beside%n",
          PROBE_TIMEOUT.toMinutes());
      return;
    }
    ForegroundProbe.Result during = probe.stop();
    SinkCounts after = counts(sink);
    if (during.seconds() < MIN_PROBED.toSeconds()) {
      out.printf(
          "   the cleanup ended %.2f s after its first child deleted, too soon to probe beside"
              + " (more --children)%n",
          during.seconds());
      return;
    }
    if (w.gone() < 0) {
      out.printf(
          "   children still left %d min after the parent DELETE's commit, beside the probe;"
              + " the probe was stopped then%n",
          PROBE_TIMEOUT.toMinutes());
    } else {
      out.printf(
          "   %.2f s from the parent DELETE's commit to the last child gone, beside the probe%n",
          w.gone());
    }
    printBreakdown(w, before, after, o);
    new Comparison("foreground transaction latency p50", "ms")
        .add("probe alone", baseline.latencyMicros().percentile(50) / 1000.0)
        .add("probe during Spillway's cleanup", during.latencyMicros().percentile(50) / 1000.0)
        .print(out);
    new Comparison("foreground transaction latency p99", "ms")
        .add("probe alone", baseline.latencyMicros().percentile(99) / 1000.0)
        .add("probe during Spillway's cleanup", during.latencyMicros().percentile(99) / 1000.0)
        .print(out);
    new Comparison("foreground throughput", "tx/s")
        .add("probe alone", baseline.tps())
        .add("probe during Spillway's cleanup", during.tps())
        .print(out);
  }

  private LfkSettings settings(Options o) {
    LfkSettings d = LfkSettings.defaults(runtime.config().sink());
    SinkSettings s = d.sink();
    Duration poll = o.sinkPollTimeout().orElse(s.pollTimeout());
    SinkSettings sink =
        new SinkSettings(
            s.consumers(),
            s.maxInFlight(),
            s.maxAttempts(),
            s.consumeAfter(),
            s.maxRetries(),
            s.retryBackoff(),
            s.retryBackoffMax(),
            s.maxRowsPerRun(),
            s.maxRuntimePerRun(),
            s.subBatchPause(),
            s.throttlePause(),
            s.throttleFactor(),
            s.subBatchFloor(),
            poll,
            s.shutdownGrace(),
            s.stepAsideAfter());
    return new LfkSettings(
        o.batchSize(),
        o.maxWait(),
        o.deleteLimit(),
        d.updateLimit(),
        o.maxDeletesPerRun(),
        d.maxUpdatesPerRun(),
        sink);
  }

  private static CheckedKey key(Tables t) {
    return new CheckedKey(
        LooseForeignKey.asyncDelete(t.child(), t.parent(), "parent_id", "bench"),
        SpillwayRuntime.MAIN,
        SpillwayRuntime.MAIN,
        List.of("id"),
        "bigint",
        "id",
        "bigint",
        Optional.empty());
  }

  /**
   * Drops and creates both tables and loads them: child {@code g} belongs to parent {@code (g - 1)
   * % parents + 1}, so each parent's children lie in bands spread over the whole table.
   */
  private static void load(DataSource ds, Tables t, Options o, boolean foreignKey)
      throws SQLException {
    BenchSql.exec(
        ds,
        "DROP TABLE IF EXISTS " + t.child().quoted(),
        "DROP TABLE IF EXISTS " + t.parent().quoted(),
        "CREATE TABLE " + t.parent().quoted() + " (id bigint PRIMARY KEY)",
        "CREATE TABLE "
            + t.child().quoted()
            + " (id bigint PRIMARY KEY, parent_id bigint NOT NULL"
            + (foreignKey ? " REFERENCES " + t.parent().quoted() + " ON DELETE CASCADE" : "")
            + ")");
    insert(ds, t, o);
  }

  private static void insert(DataSource ds, Tables t, Options o) throws SQLException {
    BenchSql.exec(
        ds,
        "INSERT INTO "
            + t.parent().quoted()
            + " SELECT g FROM generate_series(1, "
            + o.parents()
            + ") g",
        "INSERT INTO "
            + t.child().quoted()
            + " SELECT g, (g - 1) % "
            + o.parents()
            + " + 1 FROM generate_series(1, "
            + o.children()
            + ") g",
        "CREATE INDEX " + t.index() + " ON " + t.child().quoted() + " (parent_id)",
        "VACUUM ANALYZE " + t.parent().quoted(),
        "VACUUM ANALYZE " + t.child().quoted(),
        "CHECKPOINT");
  }

  private static void createProcedure(DataSource ds, Tables t) throws SQLException {
    BenchSql.exec(
        ds,
        "CREATE OR REPLACE PROCEDURE "
            + PROCEDURE
            + "(ids bigint[]) LANGUAGE plpgsql AS $$\n"
            + "DECLARE n bigint;\n"
            + "BEGIN\n"
            + "  LOOP\n"
            + "    DELETE FROM "
            + t.child().quoted()
            + " WHERE id IN (SELECT id FROM "
            + t.child().quoted()
            + " WHERE parent_id = ANY (ids) LIMIT "
            + PROCEDURE_LIMIT
            + " FOR UPDATE SKIP LOCKED);\n"
            + "    GET DIAGNOSTICS n = ROW_COUNT;\n"
            + "    COMMIT;\n"
            + "    EXIT WHEN n = 0;\n"
            + "  END LOOP;\n"
            + "END $$");
  }

  /** Deletes the parents, then calls the procedure with their ids; seconds from commit to end. */
  private static double procedure(DataSource ds, Tables t) throws SQLException {
    try (Connection c = ds.getConnection();
        Statement s = c.createStatement();
        PreparedStatement call = c.prepareStatement("CALL " + PROCEDURE + "(?)")) {
      c.setAutoCommit(true);
      List<Long> ids = new ArrayList<>();
      // In autocommit the DELETE has committed once its rows are here.
      try (ResultSet rs = s.executeQuery("DELETE FROM " + t.parent().quoted() + " RETURNING id")) {
        while (rs.next()) {
          ids.add(rs.getLong(1));
        }
      }
      long committed = System.nanoTime();
      Array array = c.createArrayOf("bigint", ids.toArray());
      call.setArray(1, array);
      call.execute();
      return (System.nanoTime() - committed) / 1e9;
    }
  }

  private static void requireEmpty(DataSource ds, Tables t, String how) throws SQLException {
    long left = BenchSql.single(ds, "SELECT count(*) FROM " + t.child().quoted());
    if (left != 0) {
      throw new IllegalStateException(how + " left " + left + " children.");
    }
  }

  private static void warmUp(DataSource ds, Tables t) throws SQLException, InterruptedException {
    BenchSql.exec(ds, "DELETE FROM " + t.parent().quoted() + " WHERE id = 0");
    long deadline = System.nanoTime() + Duration.ofMinutes(2).toNanos();
    while (BenchSql.single(ds, "SELECT count(*) FROM " + t.child().quoted() + " WHERE id = 0")
        > 0) {
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException("The warm-up child was not cleaned within 2 minutes.");
      }
      Thread.sleep(50);
    }
  }

  /**
   * Deletes every parent in one statement, then polls from its own connection until no child is
   * left, noting when deletes reach Kafka, when the first cleanup batch does, when the first child
   * is deleted (running {@code onFirstDeletion} then), and the child table's health.
   */
  private Watch deleteAndWatch(
      DataSource ds, Tables t, Options o, Duration timeout, Runnable onFirstDeletion)
      throws Exception {
    Sink sink = runtime.sink(Pipeline.LFK).orElseThrow();
    long rowsBefore = sink.metrics().rowsCount();
    try (TopicTail deleted =
            new TopicTail(
                runtime.bootstrapServers(),
                runtime.config().kafka().properties(),
                List.of(runtime.topics().deletedRecords()));
        TopicTail batches =
            new TopicTail(
                runtime.bootstrapServers(),
                runtime.config().kafka().properties(),
                List.of(runtime.topics().cleanupBatches()));
        Connection c = ds.getConnection();
        PreparedStatement exists =
            c.prepareStatement("SELECT EXISTS (SELECT 1 FROM " + t.child().quoted() + ")")) {
      c.setAutoCommit(true);
      BenchSql.exec(ds, "DELETE FROM " + t.parent().quoted());
      long committed = System.nanoTime();
      double inKafka = -1;
      double firstBatch = -1;
      double firstDeletion = -1;
      int polls = 0;
      long pollNanos = 0;
      int unhealthy = 0;
      String reason = "";
      double firstUnhealthy = -1;
      long rowsAtUnhealthy = 0;
      // Poll intervals after the first deletion in which no statement finished: pauses, re-queues,
      // waits for batches.
      long stalledNanos = 0;
      long lastRows = rowsBefore;
      long lastPoll = committed;
      long next = committed;
      while (System.nanoTime() - committed < timeout.toNanos()) {
        if (inKafka < 0 && deleted.appendedSinceOpen() >= o.parents()) {
          inKafka = since(committed);
        }
        if (firstBatch < 0 && batches.appendedSinceOpen() > 0) {
          firstBatch = since(committed);
        }
        long rows = sink.metrics().rowsCount();
        long now = System.nanoTime();
        if (firstDeletion < 0 && rows > rowsBefore) {
          firstDeletion = since(committed);
          onFirstDeletion.run();
        } else if (firstDeletion >= 0 && rows == lastRows) {
          stalledNanos += now - lastPoll;
        }
        lastRows = rows;
        lastPoll = now;
        Health h = runtime.health().state(SpillwayRuntime.MAIN, t.child());
        if (!(h instanceof Health.Normal)) {
          if (unhealthy++ == 0) {
            firstUnhealthy = since(committed);
            rowsAtUnhealthy = o.children() - (rows - rowsBefore);
          }
          reason = h.label() + ": " + h.reason();
        }
        long q = System.nanoTime();
        boolean any;
        try (ResultSet rs = exists.executeQuery()) {
          rs.next();
          any = rs.getBoolean(1);
        }
        long answered = System.nanoTime();
        pollNanos += answered - q;
        polls++;
        if (!any) {
          return new Watch(
              (answered - committed) / 1e9,
              inKafka,
              firstBatch,
              firstDeletion,
              polls,
              pollNanos / 1e6 / polls,
              unhealthy,
              reason,
              firstUnhealthy,
              rowsAtUnhealthy,
              stalledNanos / 1e9);
        }
        next += o.poll().toNanos();
        long wait = next - System.nanoTime();
        if (wait > 0) {
          TimeUnit.NANOSECONDS.sleep(wait);
        }
      }
      return new Watch(
          -1,
          inKafka,
          firstBatch,
          firstDeletion,
          polls,
          pollNanos / 1e6 / polls,
          unhealthy,
          reason,
          firstUnhealthy,
          rowsAtUnhealthy,
          stalledNanos / 1e9);
    }
  }

  private static double since(long nanos) {
    return (System.nanoTime() - nanos) / 1e9;
  }

  private SinkCounts counts(Sink sink) {
    String pipeline = Pipeline.LFK.id();
    Timer t = runtime.registry().find("spillway_sink_sub_batch").tag("pipeline", pipeline).timer();
    return new SinkCounts(
        sink.metrics().rowsCount(),
        t == null ? 0 : t.count(),
        t == null ? 0 : t.totalTime(TimeUnit.SECONDS),
        outcomes(pipeline, "Done"),
        outcomes(pipeline, "LimitReached"));
  }

  private long outcomes(String pipeline, String outcome) {
    Counter c =
        runtime
            .registry()
            .find("spillway_sink_batches")
            .tag("pipeline", pipeline)
            .tag("outcome", outcome)
            .counter();
    return c == null ? 0 : (long) c.count();
  }

  private static String serverVersion(DataSource ds) throws SQLException {
    try (Connection c = ds.getConnection();
        Statement s = c.createStatement();
        ResultSet rs = s.executeQuery("SHOW server_version")) {
      rs.next();
      return rs.getString(1);
    }
  }
}
