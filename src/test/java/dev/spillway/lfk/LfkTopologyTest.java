package dev.spillway.lfk;

import static org.assertj.core.api.Assertions.assertThat;

import dev.spillway.event.CleanupBatch;
import dev.spillway.event.DeletedRecord;
import dev.spillway.event.EventSerdes;
import dev.spillway.event.KafkaClients;
import dev.spillway.event.Pipeline;
import dev.spillway.event.TableName;
import dev.spillway.event.Topics;
import dev.spillway.sink.SinkHeaders;
import dev.spillway.sink.SinkSettings;
import dev.spillway.testing.TopologyGolden;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.TestOutputTopic;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.test.TestRecord;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class LfkTopologyTest {
  private static final Topics TOPICS = new Topics("spillway");
  private static final TableName PROJECTS = TableName.parse("projects");
  private static final TableName USERS = TableName.parse("users");

  private final LfkSettings settings =
      new LfkSettings(
          3, Duration.ofSeconds(2), 1000, 500, 100_000, 50_000, SinkSettings.defaults());
  private TopologyTestDriver driver;
  private TestInputTopic<String, byte[]> in;
  private TestOutputTopic<String, byte[]> out;
  private TestOutputTopic<String, byte[]> dlq;
  private final AtomicInteger malformed = new AtomicInteger();

  @BeforeEach
  void setUp() {
    drive(settings);
    dlq =
        driver.createOutputTopic(
            TOPICS.dlq(Pipeline.LFK), new StringDeserializer(), new ByteArrayDeserializer());
  }

  /** The topology with these settings, on a test driver, with its input and output topics. */
  private void drive(LfkSettings with) {
    Properties p = new Properties();
    p.put(StreamsConfig.APPLICATION_ID_CONFIG, "lfk-topology-test");
    p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "unused:9092");
    driver =
        new TopologyTestDriver(
            LfkTopology.build(TOPICS, with, malformed::incrementAndGet),
            p,
            Instant.parse("2026-01-01T00:00:00Z"));
    in =
        driver.createInputTopic(
            TOPICS.deletedRecords(), new StringSerializer(), new ByteArraySerializer());
    out =
        driver.createOutputTopic(
            TOPICS.cleanupBatches(), new StringDeserializer(), new ByteArrayDeserializer());
  }

  @AfterEach
  void tearDown() {
    driver.close();
  }

  private void deleted(TableName table, Object id, long commitMicros) {
    DeletedRecord r = new DeletedRecord("main", table, Map.of("id", id), commitMicros, 1, 0);
    in.pipeInput(table.toString(), EventSerdes.encode(r));
  }

  private List<String> batches() {
    return out.readRecordsToList().stream()
        .map(
            (TestRecord<String, byte[]> r) -> {
              CleanupBatch b = EventSerdes.decodeCleanupBatch(r.value());
              return r.key() + "=" + b.table() + " " + b.ids() + " @" + b.oldestCommitTimeMicros();
            })
        .toList();
  }

  @Test
  void should_match_the_committed_topology_description() {
    TopologyGolden.assertMatches(LfkTopology.build(TOPICS, settings, () -> {}), "lfk");
  }

  @Test
  void should_group_deleted_ids_per_parent_table_up_to_the_batch_size() {
    deleted(PROJECTS, 1L, 30);
    deleted(USERS, 7L, 10);
    deleted(PROJECTS, 2L, 20);
    deleted(PROJECTS, 3L, 40);
    deleted(PROJECTS, 4L, 50);
    assertThat(batches()).containsExactly("public.projects#0=public.projects [1, 2, 3] @20");
    deleted(PROJECTS, 5L, 60);
    deleted(PROJECTS, 6L, 70);
    // The next batch of the same parent gets the next key, so it may land on another partition.
    assertThat(batches()).containsExactly("public.projects#1=public.projects [4, 5, 6] @50");
  }

  @Test
  void should_carry_each_id_s_deleting_transaction_into_its_batch() {
    long[] transactions = {901, 0, 903}; // the second written by an earlier version
    for (int i = 0; i < 3; i++) {
      DeletedRecord r =
          new DeletedRecord("main", PROJECTS, Map.of("id", 1L + i), 10, 1, 0, transactions[i]);
      in.pipeInput(PROJECTS.toString(), EventSerdes.encode(r));
    }
    CleanupBatch b = EventSerdes.decodeCleanupBatch(out.readValue());
    assertThat(b.ids()).containsExactly("1", "2", "3");
    assertThat(b.txIds()).containsExactly(901L, 0L, 903L);
  }

  @Test
  void should_keep_each_batch_of_long_bytea_keys_within_a_kafka_record() {
    driver.close();
    drive(
        new LfkSettings(
            100_000, Duration.ofSeconds(2), 1000, 500, 100_000, 50_000, SinkSettings.defaults()));
    // A bytea key's id is its hex text: twice its bytes in the batch, against once in the record.
    for (int i = 0; i < 2_000; i++) {
      byte[] key = new byte[1_000];
      java.nio.ByteBuffer.wrap(key).putInt(i);
      deleted(PROJECTS, key, i);
    }
    driver.advanceWallClockTime(Duration.ofSeconds(3));

    List<byte[]> values = out.readValuesToList();
    assertThat(values)
        .allSatisfy(v -> assertThat(v.length).isLessThanOrEqualTo(KafkaClients.MAX_VALUE_BYTES));
    assertThat(values.stream().mapToInt(v -> EventSerdes.decodeCleanupBatch(v).ids().size()).sum())
        .isEqualTo(2_000);
  }

  @Test
  void should_send_a_partial_batch_after_the_wait() {
    deleted(USERS, "8f1c", 10);
    driver.advanceWallClockTime(Duration.ofMillis(1500));
    assertThat(batches()).isEmpty();
    driver.advanceWallClockTime(Duration.ofMillis(600));
    assertThat(batches()).containsExactly("public.users#0=public.users [8f1c] @10");
  }

  @Test
  void should_dead_letter_a_delete_without_its_key_saying_so() {
    Map<String, Object> noKey = new java.util.HashMap<>();
    noKey.put("id", null);
    in.pipeInput(
        "public.projects", EventSerdes.encode(new DeletedRecord("main", PROJECTS, noKey, 5, 1, 0)));
    assertThat(reason(dlq.readRecordsToList().get(0)))
        .contains(
            "parent public.projects has a delete without its key [id] (its replica identity leaves"
                + " the primary key out?)");
  }

  @Test
  void should_dead_letter_records_that_are_not_deleted_rows_with_a_key_children_refer_to() {
    in.pipeInput("public.projects", "garbage".getBytes(StandardCharsets.UTF_8));
    DeletedRecord composite =
        new DeletedRecord("main", PROJECTS, Map.of("project_id", 1L, "tenant", 2L), 5, 1, 0);
    in.pipeInput("public.projects", EventSerdes.encode(composite));
    List<TestRecord<String, byte[]>> dead = dlq.readRecordsToList();
    assertThat(dead).hasSize(2);
    assertThat(malformed).as("counted for the metric").hasValue(2);
    assertThat(reason(dead.get(1))).contains("one-column primary key, or one holding an id column");
    assertThat(
            new String(
                dead.get(0).headers().lastHeader(SinkHeaders.SOURCE).value(),
                StandardCharsets.UTF_8))
        .as("where the record came from")
        .isEqualTo(TOPICS.deletedRecords() + "-0@0");
    driver.advanceWallClockTime(Duration.ofSeconds(5));
    assertThat(batches()).isEmpty();
  }

  @Test
  void should_take_the_id_of_a_partitioned_parents_key_of_several_columns() {
    TableName builds = TableName.parse("p_ci_builds");
    in.pipeInput(
        builds.toString(),
        EventSerdes.encode(
            new DeletedRecord("ci", builds, orderedKey("partition_id", 100L, "id", 7L), 10, 1, 0)));
    in.pipeInput(
        builds.toString(),
        EventSerdes.encode(
            new DeletedRecord("ci", builds, orderedKey("id", 8L, "partition_id", 101L), 11, 1, 0)));
    driver.advanceWallClockTime(Duration.ofSeconds(3));

    assertThat(dlq.readRecordsToList()).isEmpty();
    assertThat(batches()).containsExactly("public.p_ci_builds#0=public.p_ci_builds [7, 8] @10");

    in.pipeInput(
        builds.toString(),
        EventSerdes.encode(
            new DeletedRecord(
                "ci", builds, orderedKey("partition_id", 100L, "id", null), 12, 1, 0)));
    assertThat(reason(dlq.readRecordsToList().get(0)))
        .contains("parent public.p_ci_builds has a delete without its key [partition_id, id]");
  }

  /** Why a dead letter was written. */
  private static String reason(TestRecord<String, byte[]> letter) {
    return new String(
        letter.headers().lastHeader(SinkHeaders.ERROR_MESSAGE).value(), StandardCharsets.UTF_8);
  }

  private static Map<String, Object> orderedKey(String a, Object va, String b, Object vb) {
    Map<String, Object> key = new java.util.LinkedHashMap<>();
    key.put(a, va);
    key.put(b, vb);
    return key;
  }

  @Test
  void should_write_binary_keys_as_bytea_text() {
    deleted(PROJECTS, new byte[] {1, (byte) 0xab}, 10);
    deleted(PROJECTS, 42L, 11);
    driver.advanceWallClockTime(Duration.ofSeconds(3));
    assertThat(batches()).containsExactly("public.projects#0=public.projects [\\x01ab, 42] @10");
  }
}
