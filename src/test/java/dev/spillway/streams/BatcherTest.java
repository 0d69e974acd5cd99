package dev.spillway.streams;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Properties;
import java.util.function.Supplier;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.TestOutputTopic;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.processor.api.MockProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;
import org.apache.kafka.streams.test.TestRecord;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class BatcherTest {
  private TopologyTestDriver driver;
  private TestInputTopic<String, byte[]> in;
  private TestOutputTopic<String, byte[]> out;

  @BeforeEach
  void setUp() {
    drive(() -> joining(3, Duration.ofSeconds(2)));
  }

  /** Drives {@code in} → the batcher → {@code out}, the batcher made by {@code batcher}. */
  private void drive(Supplier<Batcher> batcher) {
    Topology t = new Topology();
    t.addSource("source-in", new StringDeserializer(), new ByteArrayDeserializer(), "in");
    t.addProcessor("batcher", batcher::get, "source-in");
    t.addStateStore(Batcher.store("pending"), "batcher");
    t.addSink("sink-out", "out", new StringSerializer(), new ByteArraySerializer(), "batcher");
    Properties p = new Properties();
    p.put(StreamsConfig.APPLICATION_ID_CONFIG, "batcher-test");
    p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "unused:9092");
    driver = new TopologyTestDriver(t, p, Instant.parse("2026-01-01T00:00:00Z"));
    in = driver.createInputTopic("in", new StringSerializer(), new ByteArraySerializer());
    out = driver.createOutputTopic("out", new StringDeserializer(), new ByteArrayDeserializer());
  }

  /** A batcher on store {@code pending} whose batches are their values joined: {@code 1,2,}. */
  static Batcher joining(int maxSize, Duration maxWait) {
    return joining(maxSize, Batcher.MAX_BATCH_BYTES, maxWait);
  }

  /** The same, with batches of at most {@code maxBytes} bytes of values. */
  static Batcher joining(int maxSize, long maxBytes, Duration maxWait) {
    return new Batcher(
        "pending",
        maxSize,
        maxBytes,
        maxWait,
        Batcher.BatchBuilder.keepingKey(
            (key, values) -> {
              StringBuilder b = new StringBuilder();
              values.forEach(v -> b.append(new String(v, StandardCharsets.UTF_8)).append(','));
              return b.toString().getBytes(StandardCharsets.UTF_8);
            }));
  }

  @AfterEach
  void tearDown() {
    driver.close();
  }

  private void send(String key, String value) {
    in.pipeInput(key, value.getBytes(StandardCharsets.UTF_8));
  }

  private List<String> emitted() {
    return out.readRecordsToList().stream()
        .map(
            (TestRecord<String, byte[]> r) ->
                r.key() + "=" + new String(r.value(), StandardCharsets.UTF_8))
        .toList();
  }

  @Test
  void should_close_a_batch_when_it_reaches_its_size() {
    send("a", "1");
    send("b", "x");
    send("a", "2");
    send("a", "3");
    send("a", "4");
    assertThat(emitted()).containsExactly("a=1,2,3,");
  }

  @Test
  void should_close_a_batch_before_its_values_pass_the_byte_limit() {
    driver.close();
    drive(() -> joining(10, 5, Duration.ofSeconds(2)));

    send("a", "aa");
    send("a", "bb");
    assertThat(emitted()).isEmpty();
    send("a", "cc"); // 6 bytes with the two before: those two go first
    assertThat(emitted()).containsExactly("a=aa,bb,");
    send("a", "ddd"); // 5 with cc: full, out at once
    assertThat(emitted()).containsExactly("a=cc,ddd,");
    send("a", "eeeeeee"); // larger than the limit alone: a batch of its own
    assertThat(emitted()).containsExactly("a=eeeeeee,");
    send("a", "f");
    driver.advanceWallClockTime(Duration.ofSeconds(2));
    assertThat(emitted())
        .as("the next batch timed from its own first value")
        .containsExactly("a=f,");
  }

  @Test
  void should_close_a_batch_when_its_first_value_has_waited_max_wait() {
    send("a", "1");
    send("b", "x");
    driver.advanceWallClockTime(Duration.ofSeconds(1));
    assertThat(emitted()).isEmpty();
    send("a", "2");
    driver.advanceWallClockTime(Duration.ofMillis(1500));
    assertThat(emitted()).containsExactlyInAnyOrder("a=1,2,", "b=x,");
    send("a", "3");
    driver.advanceWallClockTime(Duration.ofSeconds(3));
    assertThat(emitted()).containsExactly("a=3,");
  }

  @Test
  void should_close_a_batch_by_wait_no_later_than_max_wait_after_its_first_value() {
    driver.advanceWallClockTime(Duration.ofMillis(310)); // the first value comes between two ticks
    send("a", "1");
    Waited waited = advanceUntilEmitted(5_000);

    assertThat(waited.emitted()).containsExactly("a=1,");
    // Checked every 200 ms (a tenth of max-wait): it goes at the last check that leaves a check
    // and a poll (100 ms) before 2 s.
    assertThat(waited.ms()).isBetween(1_700L, 2_000L);
  }

  @Test
  void should_close_a_batch_by_wait_within_max_wait_though_the_next_check_comes_a_poll_late() {
    driver.advanceWallClockTime(Duration.ofMillis(401)); // the first value comes just after a check
    send("a", "1");
    // Checks on time up to the one 1,799 ms after the value (at 2,200 ms) ...
    Waited onTime = advanceUntilEmitted(1_800);
    List<String> emitted = onTime.emitted();
    long waitedMs = onTime.ms();
    if (emitted.isEmpty()) {
      // ... and the next, due at 2,400 ms, 99 ms late, as when the thread waited a poll for input.
      driver.advanceWallClockTime(Duration.ofMillis(299));
      waitedMs += 299;
      emitted = emitted();
    }

    assertThat(emitted).containsExactly("a=1,");
    assertThat(waitedMs).isLessThanOrEqualTo(2_000L);
  }

  private record Waited(List<String> emitted, long ms) {}

  /** Advances the wall clock 10 ms at a time until a batch goes or {@code limitMs} have passed. */
  private Waited advanceUntilEmitted(long limitMs) {
    List<String> emitted = List.of();
    long waitedMs = 0;
    while (emitted.isEmpty() && waitedMs < limitMs) {
      driver.advanceWallClockTime(Duration.ofMillis(10));
      waitedMs += 10;
      emitted = emitted();
    }
    return new Waited(emitted, waitedMs);
  }

  @Test
  void should_check_pending_values_every_tenth_of_max_wait_within_bounds() {
    assertThat(Batcher.tick(Duration.ofSeconds(2))).isEqualTo(Duration.ofMillis(200));
    assertThat(Batcher.tick(Duration.ofMillis(100))).isEqualTo(Duration.ofMillis(20));
    assertThat(Batcher.tick(Duration.ofHours(1))).isEqualTo(Duration.ofSeconds(1));
    assertThat(Batcher.poll(Duration.ofMillis(20))).isEqualTo(Duration.ofMillis(10));
    assertThat(Batcher.poll(Duration.ofSeconds(1))).isEqualTo(Duration.ofMillis(100));
  }

  @Test
  void should_time_a_key_that_closed_by_size_again_from_its_next_value() {
    send("a", "1");
    send("b", "x");
    driver.advanceWallClockTime(Duration.ofSeconds(1));
    send("a", "2");
    send("a", "3");
    send("a", "4");
    assertThat(emitted()).containsExactly("a=1,2,3,");

    driver.advanceWallClockTime(Duration.ofMillis(1200));
    assertThat(emitted()).containsExactly("b=x,");
    driver.advanceWallClockTime(Duration.ofMillis(1000));
    assertThat(emitted()).containsExactly("a=4,");
  }

  @Test
  void should_have_its_changelog_compacted_soon_in_both_pipelines() {
    // Loose foreign keys and buffers both batch through this store.
    assertThat(Batcher.store("pending").logConfig())
        .containsEntry("max.compaction.lag.ms", "600000")
        .containsEntry("delete.retention.ms", "600000");
    assertThat(Batcher.store("pending").loggingEnabled()).isTrue();
  }

  @Test
  void should_emit_each_pending_value_once_when_the_same_instance_is_initialized_again() {
    KeyValueStore<String, byte[]> store =
        Stores.keyValueStoreBuilder(
                Stores.inMemoryKeyValueStore("pending"), Serdes.String(), Serdes.ByteArray())
            .withLoggingDisabled()
            .build();
    MockProcessorContext<String, byte[]> context = new MockProcessorContext<>();
    store.init(context.getStateStoreContext(), store);
    context.addStateStore(store);
    Batcher batcher = joining(10, Duration.ofSeconds(2));
    context.setCurrentSystemTimeMs(1_000);
    batcher.init(context);
    batcher.process(new Record<>("a", "1".getBytes(StandardCharsets.UTF_8), 0));
    batcher.process(new Record<>("a", "2".getBytes(StandardCharsets.UTF_8), 0));

    batcher.init(context); // as Streams does when a suspended task is resumed
    assertThat(context.scheduledPunctuators())
        .extracting(MockProcessorContext.CapturedPunctuator::cancelled)
        .as("the first life's check cancelled, so checks do not pile up")
        .containsExactly(true, false);
    context.scheduledPunctuators().get(1).getPunctuator().punctuate(10_000);

    assertThat(
            context.forwarded().stream()
                .map(
                    f ->
                        f.record().key()
                            + "="
                            + new String(f.record().value(), StandardCharsets.UTF_8))
                .toList())
        .containsExactly("a=1,2,");
    try (var left = store.all()) {
      assertThat(left.hasNext()).as("entries left in the store").isFalse();
    }
  }

  @Test
  void should_split_what_a_restart_brings_back_within_the_limits() {
    KeyValueStore<String, byte[]> store =
        Stores.keyValueStoreBuilder(
                Stores.inMemoryKeyValueStore("pending"), Serdes.String(), Serdes.ByteArray())
            .withLoggingDisabled()
            .build();
    MockProcessorContext<String, byte[]> context = new MockProcessorContext<>();
    store.init(context.getStateStoreContext(), store);
    context.addStateStore(store);
    context.setCurrentSystemTimeMs(1_000);
    Batcher before = joining(100, Batcher.MAX_BATCH_BYTES, Duration.ofSeconds(2));
    before.init(context);
    for (String v : List.of("aa", "bb", "cc", "d", "e", "f", "g")) {
      before.process(new Record<>("a", v.getBytes(StandardCharsets.UTF_8), 0));
    }

    Batcher after = joining(3, 5, Duration.ofSeconds(2)); // restarted with smaller limits
    after.init(context);
    context.scheduledPunctuators().get(1).getPunctuator().punctuate(10_000);

    assertThat(
            context.forwarded().stream()
                .map(f -> new String(f.record().value(), StandardCharsets.UTF_8))
                .toList())
        .containsExactly("aa,bb,", "cc,d,e,", "f,g,");
  }
}
