package dev.spillway.bench;

import dev.spillway.event.Pipeline;
import dev.spillway.event.TableName;
import dev.spillway.health.Health;
import dev.spillway.health.ManualIndicator;
import dev.spillway.runtime.SpillwayRuntime;
import dev.spillway.sink.BatchHandler;
import dev.spillway.sink.Outcome;
import dev.spillway.sink.RunContext;
import dev.spillway.sink.Sink;
import dev.spillway.sink.SinkRecord;
import dev.spillway.sink.SinkSettings;
import dev.spillway.sink.Target;
import io.micrometer.core.instrument.Timer;
import java.io.PrintWriter;
import java.nio.ByteBuffer;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * {@code bench sink}: a sink deleting rows in sub-batches while a foreground probe runs; a STOP
 * signal mid-way, timed until no sub-batch starts any more; and what health sampling costs.
 */
public final class SinkBench {
  /** Sizes of one run. */
  public record Options(int rows, int batchSize, int subBatch, int clients) {}

  private static final TableName TABLE = new TableName("public", "bench_sink_rows");
  private static final Duration PROBE = Duration.ofSeconds(5);

  /** How long the health monitor may take to publish the benchmark's STOP: many samples. */
  private static final Duration STOP_WAIT = Duration.ofSeconds(60);

  private final SpillwayRuntime runtime;
  private final PrintWriter out;

  public SinkBench(SpillwayRuntime runtime, PrintWriter out) {
    this.runtime = runtime;
    this.out = out;
  }

  /** Deletes the ids of a batch (first id, last id) in sub-batches; records when each starts. */
  static final class RangeDelete implements BatchHandler {
    final ConcurrentLinkedQueue<Long> subBatchStarts = new ConcurrentLinkedQueue<>();
    private final int subBatch;

    RangeDelete(int subBatch) {
      this.subBatch = subBatch;
    }

    @Override
    public Optional<Target> target(SinkRecord record) {
      return record.value().length == 16
          ? Optional.of(new Target(SpillwayRuntime.MAIN, TABLE))
          : Optional.empty();
    }

    @Override
    public Outcome execute(SinkRecord record, RunContext context) throws Exception {
      ByteBuffer b = ByteBuffer.wrap(record.value());
      long from = b.getLong();
      long to = b.getLong();
      String sql =
          "DELETE FROM "
              + TABLE.quoted()
              + " WHERE id IN (SELECT id FROM "
              + TABLE.quoted()
              + " WHERE id BETWEEN ? AND ? LIMIT ? FOR UPDATE SKIP LOCKED)";
      while (true) {
        Optional<Outcome> end = context.checkpoint();
        if (end.isPresent()) {
          return end.get();
        }
        int size = context.subBatchSize(subBatch);
        long start = System.nanoTime();
        subBatchStarts.add(start);
        int deleted;
        try (Connection c = context.dataSource().getConnection();
            PreparedStatement ps = c.prepareStatement(sql)) {
          ps.setLong(1, from);
          ps.setLong(2, to);
          ps.setInt(3, size);
          deleted = ps.executeUpdate();
        }
        context.subBatchDone(deleted, System.nanoTime() - start);
        if (deleted < size) {
          return new Outcome.Done(context.rows());
        }
      }
    }
  }

  public void run(Options o) throws Exception {
    DataSource ds = runtime.databases().dataSource(SpillwayRuntime.MAIN);
    BenchSql.exec(
        ds,
        "DROP TABLE IF EXISTS " + TABLE.quoted(),
        "CREATE TABLE " + TABLE.quoted() + " (id bigint PRIMARY KEY, pad text)",
        "INSERT INTO "
            + TABLE.quoted()
            + " SELECT g, repeat('x', 100) FROM generate_series(1, "
            + o.rows()
            + ") g",
        "VACUUM ANALYZE " + TABLE.quoted());
    ForegroundProbe probe = new ForegroundProbe(ds, o.clients(), 10_000);
    probe.prepare();

    out.printf(
        "1) Foreground probe alone, %d clients, %d s (after as long unmeasured, so the baseline"
            + " is not taken while its code and the fresh runtime's still compile)%n",
        o.clients(), PROBE.toSeconds());
    out.flush();
    probe.start();
    Thread.sleep(PROBE.toMillis());
    probe.stop();
    probe.start();
    Thread.sleep(PROBE.toMillis());
    ForegroundProbe.Result baseline = probe.stop();

    ManualIndicator manual = new ManualIndicator();
    runtime.health().addIndicators(SpillwayRuntime.MAIN, List.of(manual));
    RangeDelete handler = new RangeDelete(o.subBatch());
    String topic = runtime.topics().batches(Pipeline.OPERATIONS, "bench-batches");
    SinkSettings settings = runtime.config().sink();
    Sink sink = runtime.startSink(Pipeline.OPERATIONS, topic, handler, settings);
    long activeBefore = activeMillis(ds);
    Timer sampling =
        runtime
            .registry()
            .find("spillway_health_sample")
            .tag("database", SpillwayRuntime.MAIN)
            .timer();
    long samplesBefore = sampling.count();
    double sampleSecondsBefore = sampling.totalTime(TimeUnit.SECONDS);
    long wallStart = System.nanoTime();

    out.printf(
        "2) The sink deletes %,d rows in batches of %,d, sub-batches of %,d, with the probe%n",
        o.rows(), o.batchSize(), o.subBatch());
    out.flush();
    // Loading wrote WAL fast enough to throttle the sink for a while; and a sink joining its
    // group deletes nothing yet: the probe measures beside deletes, once they run at full speed.
    Healthy.await(runtime, TABLE, "the table", out);
    produce(topic, o);
    long joinDeadline = System.nanoTime() + Duration.ofMinutes(1).toNanos();
    while (handler.subBatchStarts.isEmpty() && System.nanoTime() < joinDeadline) {
      Thread.sleep(10);
    }
    long rowsAtProbe = BenchSql.single(ds, "SELECT count(*) FROM " + TABLE.quoted());
    probe.start();
    Thread.sleep(PROBE.toMillis());
    ForegroundProbe.Result during = probe.stop();
    long rowsAfterProbe = BenchSql.single(ds, "SELECT count(*) FROM " + TABLE.quoted());
    out.printf(
        "   rows deleted while probed: %,d of %,d%s%n",
        rowsAtProbe - rowsAfterProbe,
        o.rows(),
        rowsAfterProbe == 0 ? " (all: the sink ended within the probe, which went on alone)" : "");

    long rowsBeforeStop = BenchSql.single(ds, "SELECT count(*) FROM " + TABLE.quoted());
    long flipped = System.nanoTime();
    manual.set(new Health.Stop("benchmark STOP signal"));
    // Looked at every millisecond, not spun on: the monitor being timed needs the CPU.
    long stopDeadline = System.nanoTime() + STOP_WAIT.toNanos();
    while (!runtime.health().state(SpillwayRuntime.MAIN, TABLE).isStop()) {
      if (System.nanoTime() > stopDeadline) {
        throw new IllegalStateException(
            "The health monitor did not publish the STOP signal within "
                + STOP_WAIT.toSeconds()
                + " s (its sampling stuck or failing?).");
      }
      Thread.sleep(1);
    }
    long published = System.nanoTime();
    Thread.sleep(3_000);
    long lastStart = handler.subBatchStarts.stream().mapToLong(Long::longValue).max().orElse(0);
    long startedAfter = handler.subBatchStarts.stream().filter(t -> t > published).count();
    long rowsLeftAtStop = BenchSql.single(ds, "SELECT count(*) FROM " + TABLE.quoted());
    manual.set(Health.NORMAL);

    long deadline = System.nanoTime() + Duration.ofMinutes(10).toNanos();
    while (BenchSql.single(ds, "SELECT count(*) FROM " + TABLE.quoted()) > 0
        && System.nanoTime() < deadline) {
      Thread.sleep(100);
    }
    double wall = (System.nanoTime() - wallStart) / 1e9;
    long samples = sampling.count() - samplesBefore;
    double sampleSeconds = sampling.totalTime(TimeUnit.SECONDS) - sampleSecondsBefore;
    long activeDelta = activeMillis(ds) - activeBefore;

    new Comparison("foreground transaction latency p50", "ms")
        .add("probe alone", baseline.latencyMicros().percentile(50) / 1000.0)
        .add("probe while the sink works", during.latencyMicros().percentile(50) / 1000.0)
        .print(out);
    new Comparison("foreground transaction latency p99", "ms")
        .add("probe alone", baseline.latencyMicros().percentile(99) / 1000.0)
        .add("probe while the sink works", during.latencyMicros().percentile(99) / 1000.0)
        .print(out);
    new Comparison("foreground throughput", "tx/s")
        .add("probe alone", baseline.tps())
        .add("probe while the sink works", during.tps())
        .print(out);

    double publishMs = (published - flipped) / 1e6;
    double quietMs = lastStart > published ? (lastStart - published) / 1e6 : 0;
    out.printf(
        "3) STOP signal: published by the monitor %.0f ms after the condition (sampling every %d ms);"
            + "%n   sub-batches started after STOP was published: %d (last %.0f ms after it);"
            + " rows left while stopped: %,d%n",
        publishMs,
        runtime.config().health().interval().toMillis(),
        startedAfter,
        quietMs,
        rowsLeftAtStop);
    out.printf(
        "   bar: no sub-batch starts later than 1 s after STOP: %s%n",
        startedAfter == 0 && (rowsBeforeStop == 0 || rowsLeftAtStop == 0)
            ? "NOT MEASURED (the sink finished before the STOP signal; use more --rows)"
            : quietMs <= 1000 ? "met" : "NOT met");
    out.printf(
        "4) Health sampling: %d samples over %.1f s, %.1f ms each on average = %.2f%% of one"
            + " connection's time;%n   %.2f%% of the database's active time in the run (%,d ms"
            + " sampling of %,d ms active)%n",
        samples,
        wall,
        samples == 0 ? 0 : sampleSeconds * 1000 / samples,
        sampleSeconds / wall * 100,
        activeDelta == 0 ? 0 : sampleSeconds * 1000 / activeDelta * 100,
        Math.round(sampleSeconds * 1000),
        activeDelta);
    out.flush();
  }

  private void produce(String topic, Options o) {
    Properties p = new Properties();
    p.putAll(runtime.config().kafka().properties());
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, runtime.bootstrapServers());
    try (KafkaProducer<byte[], byte[]> producer =
        new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
      for (long from = 1; from <= o.rows(); from += o.batchSize()) {
        long to = Math.min(o.rows(), from + o.batchSize() - 1);
        byte[] value = ByteBuffer.allocate(16).putLong(from).putLong(to).array();
        producer.send(new ProducerRecord<>(topic, null, value));
      }
    }
  }

  /** Milliseconds the database spent executing statements (PostgreSQL 14+). */
  private static long activeMillis(DataSource ds) throws SQLException {
    try (Connection c = ds.getConnection();
        Statement s = c.createStatement()) {
      s.execute("SELECT pg_stat_force_next_flush()");
      try (ResultSet rs =
          s.executeQuery(
              "SELECT active_time::bigint FROM pg_stat_database WHERE datname = current_database()")) {
        rs.next();
        return rs.getLong(1);
      }
    }
  }
}
