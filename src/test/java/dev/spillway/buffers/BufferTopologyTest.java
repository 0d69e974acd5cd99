package dev.spillway.buffers;

import static org.assertj.core.api.Assertions.assertThat;

import dev.spillway.event.BufferBatch;
import dev.spillway.event.BufferEvent;
import dev.spillway.event.EventSerdes;
import dev.spillway.event.Pipeline;
import dev.spillway.event.TableName;
import dev.spillway.event.Topics;
import dev.spillway.sink.SinkHeaders;
import dev.spillway.testing.TopologyGolden;
import java.net.URI;
import java.time.Duration;
import java.time.Instant;
import java.util.Arrays;
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

class BufferTopologyTest {
  private static final Topics TOPICS = new Topics("spillway");
  private static final TableName TABLE = new TableName("public", "contact_activity_events");
  private static final HandlerSpec HTTP =
      new HandlerSpec.Http(URI.create("http://crm.local/bulk"), Map.of(), Duration.ofSeconds(10));

  private TopologyTestDriver driver;
  private TestInputTopic<String, byte[]> events;
  private TestOutputTopic<String, byte[]> batches;
  private TestOutputTopic<String, byte[]> dlq;
  private final AtomicInteger malformed = new AtomicInteger();
  private final AtomicInteger republished = new AtomicInteger();

  @BeforeEach
  void setUp() {
    BufferSettings s =
        BufferSettings.of("contact_activity_events", TABLE, "main", HTTP)
            .withBatching(3, Duration.ofSeconds(2));
    Properties p = new Properties();
    p.put(StreamsConfig.APPLICATION_ID_CONFIG, "buffer-topology-test");
    p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "unused:9092");
    driver =
        new TopologyTestDriver(
            BufferTopology.build(
                s, TOPICS, malformed::incrementAndGet, republished::incrementAndGet),
            p,
            Instant.parse("2026-01-01T00:00:00Z"));
    events =
        driver.createInputTopic(
            TOPICS.bufferEvents("contact_activity_events"),
            new StringSerializer(),
            new ByteArraySerializer());
    batches =
        driver.createOutputTopic(
            TOPICS.bufferBatches("contact_activity_events"),
            new StringDeserializer(),
            new ByteArrayDeserializer());
    dlq =
        driver.createOutputTopic(
            TOPICS.dlq(Pipeline.BUFFERS), new StringDeserializer(), new ByteArrayDeserializer());
  }

  @AfterEach
  void tearDown() {
    driver.close();
  }

  private static BufferEvent event(long id) {
    return new BufferEvent(
        "main", TABLE, Map.of("id", id, "activity", "call"), 1_000_000L * id, 5000 + id, id, 0);
  }

  private void insert(long... ids) {
    for (long id : ids) {
      events.pipeInput(TABLE.toString(), EventSerdes.encode(event(id)));
    }
  }

  private static List<Object> ids(BufferBatch b) {
    return b.events().stream().map(e -> e.row().get("id")).toList();
  }

  @Test
  void should_close_a_batch_when_it_reaches_batch_size() {
    insert(1, 2, 3, 4);
    List<TestRecord<String, byte[]>> out = batches.readRecordsToList();
    assertThat(out).hasSize(1);
    BufferBatch b = EventSerdes.decodeBufferBatch(out.get(0).value());
    assertThat(ids(b)).containsExactly(1L, 2L, 3L);
    assertThat(b.buffer()).isEqualTo("contact_activity_events");
    assertThat(out.get(0).key()).as("keyed by group id").isEqualTo(b.groupId());
  }

  /**
   * Row {@code id} inserted as capture publishes an insert read from the WAL: at {@code lsn}, its
   * transaction committed at {@code commit} µs; published again, only its capture time differs.
   */
  private void captured(long id, long lsn, long commit, long capturedAt) {
    BufferEvent e =
        new BufferEvent(
            "main", TABLE, Map.of("id", id, "activity", "call"), commit, lsn, capturedAt, 7);
    events.pipeInput(TABLE.toString(), EventSerdes.encode(e));
  }

  /** The ids of every batch out so far, once those waiting have had their max-wait. */
  private List<Object> batchedIds() {
    driver.advanceWallClockTime(Duration.ofSeconds(3));
    return batches.readRecordsToList().stream()
        .flatMap(r -> ids(EventSerdes.decodeBufferBatch(r.value())).stream())
        .toList();
  }

  @Test
  void should_pass_over_the_inserts_capture_published_again_after_a_take_over() {
    for (long id = 1; id <= 5; id++) {
      captured(id, 100 * id, 1_000 * id, 1);
    }
    // The instance taking capture over goes on from its last stored position: 3 onwards again.
    for (long id = 3; id <= 5; id++) {
      captured(id, 100 * id, 1_000 * id, 2);
    }
    captured(6, 600, 6_000, 2);
    assertThat(batchedIds()).as("each row once").containsExactly(1L, 2L, 3L, 4L, 5L, 6L);
    assertThat(republished).hasValue(3);
  }

  @Test
  void should_pass_over_a_repeat_whatever_came_between_and_in_whatever_order() {
    captured(3, 300, 3_000, 1);
    captured(1, 100, 1_000, 1); // a capture batch Kafka took late: lower, after higher
    captured(2, 200, 2_000, 1);
    captured(1, 100, 1_000, 2);
    captured(3, 300, 3_000, 2);
    assertThat(batchedIds()).containsExactly(3L, 1L, 2L);
    assertThat(republished).hasValue(2);
  }

  @Test
  void should_tell_apart_the_rows_of_one_wal_record_and_pass_over_one_published_again() {
    // A COPY writes several rows in one WAL record: they share a position and a commit.
    captured(1, 100, 1_000, 1);
    captured(2, 100, 1_000, 1);
    captured(2, 100, 1_000, 2); // published again
    captured(3, 100, 1_000, 2);
    assertThat(batchedIds()).containsExactly(1L, 2L, 3L);
    assertThat(republished).hasValue(1);
  }

  @Test
  void should_pass_on_the_same_row_inserted_again_and_rows_of_another_server() {
    captured(1, 9_100, 2_000, 1);
    captured(1, 9_200, 2_500, 1); // deleted and inserted again: another change
    // Another server (restored, a slot made anew): its LSNs lower, even the same.
    captured(2, 100, 3_000, 2);
    captured(1, 9_100, 3_500, 2);
    assertThat(batchedIds()).containsExactly(1L, 1L, 2L, 1L);
    assertThat(republished).hasValue(0);
  }

  @Test
  void should_pass_on_rows_a_snapshot_read_however_often() {
    insert(1, 2); // reads carry transaction id 0; so do events of an earlier version
    insert(1);
    assertThat(batchedIds()).containsExactly(1L, 2L, 1L);
    assertThat(republished).hasValue(0);
  }

  @Test
  void should_close_a_batch_when_max_wait_has_passed_since_its_first_event() {
    insert(1);
    driver.advanceWallClockTime(Duration.ofSeconds(1));
    insert(2);
    assertThat(batches.isEmpty()).isTrue();
    driver.advanceWallClockTime(Duration.ofMillis(1500));
    List<TestRecord<String, byte[]>> out = batches.readRecordsToList();
    assertThat(out).hasSize(1);
    assertThat(ids(EventSerdes.decodeBufferBatch(out.get(0).value()))).containsExactly(1L, 2L);
  }

  @Test
  void should_give_the_same_events_the_same_group_id_and_other_events_another() {
    BufferBatch a = BufferBatch.of("b", List.of(event(1), event(2)));
    BufferBatch again = BufferBatch.of("b", List.of(event(1), event(2)));
    BufferBatch other = BufferBatch.of("b", List.of(event(1), event(3)));
    assertThat(again.groupId()).isEqualTo(a.groupId());
    assertThat(other.groupId()).isNotEqualTo(a.groupId());
  }

  @Test
  void should_send_an_event_that_does_not_decode_to_the_dead_letter_topic() {
    events.pipeInput(TABLE.toString(), "garbage".getBytes());
    insert(1, 2, 3);
    List<TestRecord<String, byte[]>> dead = dlq.readRecordsToList();
    assertThat(dead).hasSize(1);
    assertThat(malformed).as("counted for the metric").hasValue(1);
    assertThat(new String(dead.get(0).headers().lastHeader(SinkHeaders.ERROR_MESSAGE).value()))
        .startsWith("Not a Spillway event");
    assertThat(batches.readRecordsToList()).hasSize(1);
  }

  @Test
  void should_stamp_a_dead_letter_with_when_it_failed_not_with_the_input_time() {
    events.pipeInput(TABLE.toString(), "garbage".getBytes(), Instant.parse("2025-06-01T00:00:00Z"));
    driver.advanceWallClockTime(Duration.ofSeconds(5));
    events.pipeInput(TABLE.toString(), "garbage".getBytes(), Instant.parse("2025-06-01T00:00:01Z"));

    List<TestRecord<String, byte[]>> dead = dlq.readRecordsToList();
    Instant failed = Instant.parse("2026-01-01T00:00:05Z");
    assertThat(dead).hasSize(2);
    assertThat(dead.get(1).getRecordTime()).isEqualTo(failed);
    assertThat(SinkHeaders.failedAt(dead.get(1).headers())).hasValue(failed.toEpochMilli());
  }

  @Test
  void should_dead_letter_an_event_without_a_value_instead_of_stopping() {
    events.pipeInput(TABLE.toString(), (byte[]) null);
    insert(1, 2, 3);
    List<TestRecord<String, byte[]>> dead = dlq.readRecordsToList();
    assertThat(dead).hasSize(1);
    assertThat(dead.get(0).headers().lastHeader(SinkHeaders.ERROR_CLASS)).isNotNull();
    assertThat(batches.readRecordsToList())
        .as("the events after it are batched as usual")
        .hasSize(1);
  }

  @Test
  void should_dead_letter_an_event_that_goes_on_past_its_end_instead_of_stopping() {
    byte[] event = EventSerdes.encode(event(9));
    events.pipeInput(TABLE.toString(), Arrays.copyOf(event, event.length + 1));
    insert(1, 2, 3);
    List<TestRecord<String, byte[]>> dead = dlq.readRecordsToList();
    assertThat(dead).hasSize(1);
    assertThat(new String(dead.get(0).headers().lastHeader(SinkHeaders.ERROR_MESSAGE).value()))
        .isEqualTo("Not a Spillway event: it goes on past its end");
    assertThat(batches.readRecordsToList()).hasSize(1);
  }

  @Test
  void should_dead_letter_an_event_without_a_key_with_the_reason() {
    events.pipeInput((String) null, EventSerdes.encode(event(9)));
    insert(1, 2, 3);
    List<TestRecord<String, byte[]>> dead = dlq.readRecordsToList();
    assertThat(dead).hasSize(1);
    assertThat(new String(dead.get(0).headers().lastHeader(SinkHeaders.ERROR_CLASS).value()))
        .isEqualTo("MalformedBufferEvent");
    assertThat(new String(dead.get(0).headers().lastHeader(SinkHeaders.ERROR_MESSAGE).value()))
        .startsWith("no key: ");
    assertThat(batches.readRecordsToList()).hasSize(1);
  }

  @Test
  void should_match_the_committed_description() {
    BufferSettings s = BufferSettings.of("contact_activity_events", TABLE, "main", HTTP);
    TopologyGolden.assertMatches(BufferTopology.build(s, TOPICS, () -> {}, () -> {}), "buffers");
  }
}
