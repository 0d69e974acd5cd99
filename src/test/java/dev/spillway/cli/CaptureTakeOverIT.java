package dev.spillway.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.spillway.capture.CaptureSettings;
import dev.spillway.event.BufferEvent;
import dev.spillway.event.EventSerdes;
import dev.spillway.event.InsertIdentity;
import dev.spillway.event.Topics;
import dev.spillway.jdbc.DatabaseEndpoint;
import dev.spillway.jdbc.Databases;
import dev.spillway.ops.StatusClient;
import dev.spillway.ops.StatusReport;
import dev.spillway.testing.Cli;
import dev.spillway.testing.EmbeddedInfra;
import dev.spillway.testing.TestSql;
import dev.spillway.testing.TopicReader;
import java.lang.ProcessBuilder.Redirect;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.function.ToIntFunction;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.sql.DataSource;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Capture taken over from an instance killed without a chance to stop (SIGKILL), in JVMs of their
 * own against the tests' Kafka and PostgreSQL: the instance taking over publishes again what the
 * killed one had published but not stored, and the buffer batches none of it twice.
 */
class CaptureTakeOverIT {
  private static final Duration TIMEOUT = Duration.ofSeconds(120);

  @TempDir Path dir;

  @Test
  void should_batch_no_row_twice_when_a_killed_capture_is_taken_over() throws Exception {
    EmbeddedInfra infra = EmbeddedInfra.get();
    String id = UUID.randomUUID().toString().replace("-", "").substring(0, 8);
    String prefix = "k" + id;
    String table = "takeover_" + id;
    DatabaseEndpoint db = infra.database("takeover");
    Topics topics = new Topics(prefix);
    List<Process> started = new ArrayList<>();
    try (Databases dbs = infra.databases("takeover")) {
      DataSource ds = dbs.dataSource("takeover");
      TestSql.exec(
          ds,
          "CREATE TABLE " + table + " (id bigint PRIMARY KEY, n int)",
          "CREATE TABLE " + table + "_log (id bigint, group_id text)");
      try {
        String kafka = infra.bootstrapServers();
        Process first = run("a", prefix, db, table, kafka);
        started.add(first);
        awaitRunning("a", first);
        // Rows inserted one at a time throughout, the capturing instance killed among them: it
        // stores its position once a minute here, so all it published since comes again.
        AtomicLong inserted = new AtomicLong();
        AtomicBoolean inserting = new AtomicBoolean(true);
        Thread load =
            new Thread(
                () -> {
                  while (inserting.get()) {
                    long next = inserted.get() + 1;
                    TestSql.exec(ds, "INSERT INTO " + table + " VALUES (" + next + ", 0)");
                    inserted.set(next);
                    LockSupport.parkNanos(2_000_000); // some 400 a second, as an application might
                  }
                });
        load.start();
        await().atMost(TIMEOUT).until(() -> handled(ds, table) > 300);
        first.destroyForcibly(); // SIGKILL, the rows still coming
        first.waitFor();

        Process second = run("b", prefix, db, table, kafka);
        started.add(second);
        awaitRunning("b", second);
        inserting.set(false);
        load.join();
        long rows = inserted.get();
        await().atMost(TIMEOUT).until(() -> handled(ds, table) >= rows);

        // Every row is handled, so every event and batch is in Kafka.
        List<ConsumerRecord<byte[], byte[]>> events =
            readPast(infra, topics.bufferEvents("events"), List::size, rows);
        Map<Object, List<InsertIdentity>> identities = new HashMap<>();
        for (ConsumerRecord<byte[], byte[]> r : events) {
          Object rowId = EventSerdes.decodeBufferEvent(r.value()).row().get("id");
          identities
              .computeIfAbsent(rowId, k -> new ArrayList<>())
              .add(EventSerdes.identityOf(r.value()).orElseThrow());
        }
        assertThat(events.size() - rows).as("inserts published twice").isPositive();
        assertThat(identities).hasSize((int) rows);
        identities
            .values()
            .forEach(ids -> assertThat(ids).as("the first identity").containsOnly(ids.get(0)));

        List<Long> batched = new ArrayList<>();
        for (ConsumerRecord<byte[], byte[]> r :
            readPast(infra, topics.bufferBatches("events"), CaptureTakeOverIT::rowsIn, rows)) {
          EventSerdes.decodeBufferBatch(r.value()).events().stream()
              .map(BufferEvent::row)
              .forEach(row -> batched.add(((Number) row.get("id")).longValue()));
        }
        assertThat(batched).as("each row in one batch").doesNotHaveDuplicates().hasSize((int) rows);
        // The instance taking over batched all of them, and says how many it passed over.
        Matcher port =
            Pattern.compile("status on http://localhost:(\\d+)")
                .matcher(Files.readString(dir.resolve("b").resolve("out.log")));
        assertThat(port.find()).isTrue();
        assertThat(StatusClient.fetch(Integer.parseInt(port.group(1))).buffers())
            .singleElement()
            .extracting(StatusReport.BufferStatus::republishedEvents)
            .isEqualTo(events.size() - rows);
        assertThat(
                TestSql.count(
                    ds,
                    "SELECT count(*) FROM (SELECT id FROM "
                        + table
                        + "_log GROUP BY id HAVING count(DISTINCT group_id) > 1) twice"))
            .as("rows handed over under two group ids")
            .isZero();
      } finally {
        for (Process p : started) {
          p.destroy();
          p.waitFor();
        }
        TestSql.dropCapture(ds, CaptureSettings.slotName(prefix, "main"));
        TestSql.exec(ds, "DROP TABLE " + table + ", " + table + "_log");
      }
    }
  }

  /**
   * The records of a topic, read until they hold {@code rows} rows as {@code count} counts them and
   * then 3 s more, for any that come after.
   */
  private static List<ConsumerRecord<byte[], byte[]>> readPast(
      EmbeddedInfra infra,
      String topic,
      ToIntFunction<List<ConsumerRecord<byte[], byte[]>>> count,
      long rows) {
    AtomicLong reached = new AtomicLong();
    return TopicReader.readUntil(
        infra.bootstrapServers(),
        topic,
        read ->
            count.applyAsInt(read) >= rows
                && (reached.compareAndSet(0, System.nanoTime())
                    ? false
                    : System.nanoTime() - reached.get() > 3_000_000_000L),
        TIMEOUT);
  }

  private static int rowsIn(List<ConsumerRecord<byte[], byte[]>> batches) {
    return batches.stream()
        .mapToInt(r -> EventSerdes.decodeBufferBatch(r.value()).events().size())
        .sum();
  }

  /** Rows handed over so far, each counted once. */
  private static long handled(DataSource ds, String table) {
    return TestSql.count(ds, "SELECT count(DISTINCT id) FROM " + table + "_log");
  }

  /**
   * {@code run} of the installation in a JVM and a working directory of its own, its output in a
   * file.
   */
  private Process run(String name, String prefix, DatabaseEndpoint db, String table, String kafka)
      throws Exception {
    Path home = dir.resolve(name);
    Files.createDirectories(home);
    Path config = home.resolve("spillway.yml");
    Files.writeString(
        config,
        String.format(
            """
            working-dir: %s
            http: { port: 0 }
            kafka:
              bootstrap-servers: "%s"
              topic-prefix: %s
              partitions: 2
              # The killed instance's consumers are let go sooner than after the default 45 s.
              properties: { session.timeout.ms: "10000" }
            databases:
              main: { url: "%s", username: %s }
            capture:
              offset-flush-interval: 60s
            buffers:
              events:
                table: %s
                batch-size: 100
                max-wait: 200ms
                handler:
                  sql: "INSERT INTO %s_log SELECT id, :group_id FROM %s WHERE id = ANY(:ids)"
            """,
            home.resolve("wd"), kafka, prefix, db.url(), db.username(), table, table, table));
    return Cli.process(
            Redirect.to(home.resolve("out.log").toFile()), "-c", config.toString(), "run")
        .start();
  }

  private void awaitRunning(String name, Process p) {
    Path log = dir.resolve(name).resolve("out.log");
    await()
        .atMost(TIMEOUT)
        .until(() -> !p.isAlive() || Files.readString(log).contains("Spillway is running"));
    assertThat(p.isAlive()).as("%s runs: %s", name, log).isTrue();
  }
}
