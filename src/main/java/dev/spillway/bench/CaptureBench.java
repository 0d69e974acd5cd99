package dev.spillway.bench;

import dev.spillway.capture.CaptureRoute;
import dev.spillway.capture.ChangeKind;
import dev.spillway.event.EventSerdes;
import dev.spillway.event.TableName;
import dev.spillway.event.Topics;
import dev.spillway.ops.TopicTail;
import dev.spillway.runtime.SpillwayRuntime;
import java.io.PrintWriter;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import javax.sql.DataSource;
import org.apache.kafka.clients.consumer.ConsumerRecord;

/**
 * {@code bench capture}: (1) one {@code DELETE} of many rows, timed from its commit until every
 * delete is in Kafka; (2) a steady rate of committed inserts, with the commit → Kafka latency of
 * each change (its commit timestamp against the moment a consumer receives it).
 */
public final class CaptureBench {
  /** Sizes of one run. */
  public record Options(int rows, int rate, Duration duration) {}

  private static final TableName PARENT = new TableName("public", "bench_capture_parent");
  private static final TableName EVENTS = new TableName("public", "bench_capture_events");
  private static final String BUFFER = "bench_capture_events";
  private static final int TICKS_PER_SECOND = 100;

  private final SpillwayRuntime runtime;
  private final PrintWriter out;

  public CaptureBench(SpillwayRuntime runtime, PrintWriter out) {
    this.runtime = runtime;
    this.out = out;
  }

  public void run(Options options) throws SQLException, InterruptedException {
    DataSource ds = runtime.databases().dataSource(SpillwayRuntime.MAIN);
    Topics topics = runtime.topics();
    BenchSql.exec(
        ds,
        "DROP TABLE IF EXISTS " + PARENT.quoted(),
        "DROP TABLE IF EXISTS " + EVENTS.quoted(),
        "CREATE TABLE " + PARENT.quoted() + " (id bigint PRIMARY KEY, payload text)",
        "CREATE TABLE "
            + EVENTS.quoted()
            + " (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, payload text)",
        "INSERT INTO "
            + PARENT.quoted()
            + " SELECT g, 'row ' || g FROM generate_series(1, "
            + options.rows()
            + ") g",
        "VACUUM ANALYZE " + PARENT.quoted());
    runtime.startCapture(
        List.of(
            new CaptureRoute(
                SpillwayRuntime.MAIN, PARENT, ChangeKind.DELETE, topics.deletedRecords()),
            new CaptureRoute(
                SpillwayRuntime.MAIN, EVENTS, ChangeKind.INSERT, topics.bufferEvents(BUFFER))));
    bulkDelete(ds, topics, options);
    steadyInserts(ds, topics, options);
  }

  private void bulkDelete(DataSource ds, Topics topics, Options options)
      throws SQLException, InterruptedException {
    try (TopicTail tail =
        new TopicTail(
            runtime.bootstrapServers(),
            runtime.config().kafka().properties(),
            List.of(topics.deletedRecords()))) {
      long start = System.nanoTime();
      BenchSql.exec(ds, "DELETE FROM " + PARENT.quoted());
      long committed = System.nanoTime();
      long received = 0;
      long deadline = committed + Duration.ofMinutes(5).toNanos();
      // "In Kafka" is the log end offset: counting it does not compete for CPU with capture the
      // way fetching and decompressing every record would.
      while (received < options.rows() && System.nanoTime() < deadline) {
        Thread.sleep(10);
        received = tail.appendedSinceOpen();
      }
      long last = System.nanoTime();
      double toKafka = (last - committed) / 1e9;
      out.printf("1) One DELETE of %,d rows%n", options.rows());
      out.printf("   statement (in SQL)          %8.2f s%n", (committed - start) / 1e9);
      out.printf(
          "   commit -> all in Kafka      %8.2f s   %,.0f events/s   (%,d of %,d received)%n",
          toKafka, received / toKafka, received, options.rows());
      out.printf(
          "   bar <= 3 s: %s%n", received == options.rows() && toKafka <= 3 ? "met" : "NOT met");
      out.flush();
    }
  }

  /**
   * The rows tick {@code tick} (from 0) inserts: so many that the first {@code n} ticks insert
   * {@code rate × n / TICKS_PER_SECOND} rows, rounded down, whatever the rate (none in some ticks
   * of a rate below one per tick).
   */
  static int rowsAtTick(int rate, long tick) {
    return (int) ((tick + 1) * rate / TICKS_PER_SECOND - tick * rate / TICKS_PER_SECOND);
  }

  private void steadyInserts(DataSource ds, Topics topics, Options options)
      throws SQLException, InterruptedException {
    AtomicLong ticks = new AtomicLong();
    AtomicLong inserted = new AtomicLong();
    AtomicReference<Exception> failure = new AtomicReference<>();
    Samples latency = new Samples();
    try (TopicTail tail =
            new TopicTail(
                runtime.bootstrapServers(),
                runtime.config().kafka().properties(),
                List.of(topics.bufferEvents(BUFFER)));
        Connection c = ds.getConnection();
        PreparedStatement insert =
            c.prepareStatement(
                "INSERT INTO "
                    + EVENTS.quoted()
                    + " (payload) SELECT 'event' FROM generate_series(1, ?)")) {
      ScheduledExecutorService writer = Executors.newSingleThreadScheduledExecutor();
      try {
        long start = System.nanoTime();
        writer.scheduleAtFixedRate(
            () -> {
              int rows = rowsAtTick(options.rate(), ticks.getAndIncrement());
              if (rows == 0) {
                return;
              }
              try {
                insert.setInt(1, rows);
                inserted.addAndGet(insert.executeUpdate());
              } catch (SQLException e) {
                failure.compareAndSet(null, e);
              }
            },
            0,
            1_000_000 / TICKS_PER_SECOND,
            TimeUnit.MICROSECONDS);
        long stopAt = start + options.duration().toNanos();
        while (System.nanoTime() < stopAt) {
          receive(tail, latency);
        }
        stop(writer);
        double elapsed = (System.nanoTime() - start) / 1e9;
        long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        while (latency.size() < inserted.get() && System.nanoTime() < deadline) {
          receive(tail, latency);
        }
        if (failure.get() != null) {
          throw new IllegalStateException(
              "The insert load failed: " + failure.get().getMessage(), failure.get());
        }
        out.printf(
            "2) Steady inserts: %,d committed in %.0f s (%,.0f changes/s, a transaction every %d"
                + " ms at most)%n",
            inserted.get(), elapsed, inserted.get() / elapsed, 1_000 / TICKS_PER_SECOND);
        out.printf(
            "   commit -> Kafka latency     p50 %d ms   p95 %d ms   p99 %d ms   max %d ms"
                + "   (%,d received)%n",
            latency.percentile(50) / 1000,
            latency.percentile(95) / 1000,
            latency.percentile(99) / 1000,
            latency.max() / 1000,
            latency.size());
        out.printf(
            "   bar p99 <= 50 ms: %s%n",
            latency.size() == inserted.get() && latency.percentile(99) <= 50_000
                ? "met"
                : "NOT met");
        out.flush();
      } finally {
        // Should the tail fail: no insert goes on, nor runs on a connection being closed.
        if (!writer.isTerminated()) {
          writer.shutdownNow();
          writer.awaitTermination(10, TimeUnit.SECONDS);
        }
      }
    }
  }

  /** Stops the writer after the insert under way, if any. */
  private static void stop(ScheduledExecutorService writer) throws InterruptedException {
    writer.shutdown();
    if (!writer.awaitTermination(10, TimeUnit.SECONDS)) {
      throw new IllegalStateException("The insert load did not stop within 10 s");
    }
  }

  private static void receive(TopicTail tail, Samples latency) {
    List<ConsumerRecord<byte[], byte[]>> records = tail.poll(Duration.ofMillis(50));
    Instant now = Instant.now();
    long nowMicros = now.getEpochSecond() * 1_000_000 + now.getNano() / 1000;
    for (ConsumerRecord<byte[], byte[]> r : records) {
      long commit = EventSerdes.decodeBufferEvent(r.value()).commitTimeMicros();
      latency.add(Math.max(0, nowMicros - commit));
    }
  }
}
