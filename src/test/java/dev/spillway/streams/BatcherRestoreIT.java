package dev.spillway.streams;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.spillway.event.TopicRange;
import dev.spillway.testing.EmbeddedInfra;
import dev.spillway.testing.TopicReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * What a batcher holds between commits survives its application: the input offsets are committed
 * past values still pending, so only the store's changelog can bring them back. And what it sent in
 * a transaction that never committed is seen by no reader of committed records.
 */
class BatcherRestoreIT {
  private static final Duration WAIT = Duration.ofSeconds(60);
  private static final Duration COMMIT_INTERVAL = Duration.ofMillis(100);

  @TempDir Path dir;

  /** The application id of a test's batcher, and its input and output topics of one partition. */
  private final String run = "batcher-" + UUID.randomUUID();

  private final String in = run + ".in";
  private final String out = run + ".out";
  private final String bootstrap = EmbeddedInfra.get().bootstrapServers();

  @BeforeEach
  void createTopics() throws Exception {
    try (Admin admin = admin(bootstrap)) {
      admin
          .createTopics(List.of(new NewTopic(in, 1, (short) 1), new NewTopic(out, 1, (short) 1)))
          .all()
          .get();
    }
  }

  @Test
  void should_emit_what_was_pending_when_an_instance_with_no_local_state_takes_over()
      throws Exception {
    try (Admin admin = admin(bootstrap)) {
      produce(bootstrap, in, "a", "1", "2", "3");
      produce(bootstrap, in, "b", "x");

      // Batches of 10 that wait an hour: only the store keeps these four values.
      try (StreamsApp first = start(bootstrap, run, in, out, dir.resolve("first"))) {
        await().atMost(WAIT).until(() -> committed(admin, run, new TopicPartition(in, 0)) == 4);
      }
      assertThat(records(bootstrap, out)).isZero();

      produce(bootstrap, in, "a", "4");
      // A per-key counter, which the store held in an earlier layout, is dropped on restore.
      produce(bootstrap, run + "-pending-changelog", "a\u0001", "counter");
      List<String> aBatches;
      try (StreamsApp second = start(bootstrap, run, in, out, dir.resolve("second"))) {
        List<String> batches =
            TopicReader.readAtLeast(bootstrap, out, 2, WAIT).stream()
                .map(
                    r ->
                        new String(r.key(), StandardCharsets.UTF_8)
                            + "="
                            + new String(r.value(), StandardCharsets.UTF_8))
                .toList();
        // Restored values go out at the first check; "4", read after the restore, may join them.
        assertThat(batches).contains("b=x,");
        aBatches = batches.stream().filter(b -> b.startsWith("a=")).toList();
        assertThat(aBatches).isIn(List.of("a=1,2,3,4,"), List.of("a=1,2,3,"));
      }
      assertThat(records(bootstrap, out)).as("batches emitted").isEqualTo(2);

      // What went out was deleted from the store: a third instance restores only what is left.
      try (StreamsApp third = start(bootstrap, run, in, out, dir.resolve("third"))) {
        if (aBatches.contains("a=1,2,3,")) {
          assertThat(TopicReader.readAtLeast(bootstrap, out, 3, WAIT).get(2).value())
              .asString(StandardCharsets.UTF_8)
              .isEqualTo("4,");
        }
        long expected = aBatches.contains("a=1,2,3,") ? 3 : 2;
        // Restored values go out at the first check, within a second: none may follow for three.
        await()
            .during(Duration.ofSeconds(3))
            .atMost(Duration.ofSeconds(10))
            .until(() -> records(bootstrap, out) == expected);
      }
    }
  }

  @Test
  void should_let_no_reader_see_a_batch_whose_transaction_a_failure_aborted() throws Exception {
    // One transaction (no commit for 5 s): a batch of two is sent, in the log but not committed,
    // then a third value fails the application before anything commits.
    produce(bootstrap, in, "a", "1", "2");
    try (StreamsApp first =
        start(bootstrap, run, in, out, dir.resolve("first"), 2, true, Duration.ofSeconds(5))) {
      await().atMost(WAIT).until(() -> uncommitted(bootstrap, out) == 1);
      produce(bootstrap, in, "a", "boom");
      await().atMost(WAIT).until(() -> first.failure().isPresent());
    }

    // Started again, it reads the same values and forms the batch again, once.
    try (StreamsApp second =
        start(bootstrap, run, in, out, dir.resolve("second"), 2, false, COMMIT_INTERVAL)) {
      await().atMost(WAIT).until(() -> records(bootstrap, out) >= 1);
      await()
          .during(Duration.ofSeconds(2))
          .atMost(Duration.ofSeconds(10))
          .untilAsserted(
              () ->
                  assertThat(records(bootstrap, out))
                      .as("batches a reader of committed records sees")
                      .isEqualTo(1));
    }
    assertThat(TopicReader.readAtLeast(bootstrap, out, 1, WAIT))
        .extracting(r -> new String(r.value(), StandardCharsets.UTF_8))
        .containsExactly("1,2,");
    assertThat(uncommitted(bootstrap, out))
        .as("the aborted batch and its second forming")
        .isEqualTo(2);
  }

  /** The records in the topic's log, whether their transaction committed or not. */
  private static long uncommitted(String bootstrap, String topic) {
    TopicPartition tp = new TopicPartition(topic, 0);
    try (KafkaConsumer<byte[], byte[]> c =
        new KafkaConsumer<>(
            Map.of(
                ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG,
                bootstrap,
                ConsumerConfig.ISOLATION_LEVEL_CONFIG,
                "read_uncommitted"),
            new ByteArrayDeserializer(),
            new ByteArrayDeserializer())) {
      c.assign(List.of(tp));
      c.seekToBeginning(List.of(tp));
      long end = c.endOffsets(List.of(tp)).get(tp);
      long n = 0;
      long until = System.nanoTime() + WAIT.toNanos();
      while (c.position(tp) < end && System.nanoTime() < until) {
        n += c.poll(Duration.ofMillis(100)).count();
      }
      return n;
    }
  }

  private static StreamsApp start(
      String bootstrap, String run, String in, String out, Path stateDir) throws Exception {
    return start(bootstrap, run, in, out, stateDir, 10, false, COMMIT_INTERVAL);
  }

  /**
   * A batcher of {@code size} values; when {@code failing}, a value {@code boom} fails the
   * application before it reaches the batcher.
   */
  private static StreamsApp start(
      String bootstrap,
      String run,
      String in,
      String out,
      Path stateDir,
      int size,
      boolean failing,
      Duration commitInterval)
      throws Exception {
    Topology t = new Topology();
    t.addSource("in", new StringDeserializer(), new ByteArrayDeserializer(), in);
    t.addProcessor(
        "fail",
        () ->
            new Processor<String, byte[], String, byte[]>() {
              private ProcessorContext<String, byte[]> context;

              @Override
              public void init(ProcessorContext<String, byte[]> context) {
                this.context = context;
              }

              @Override
              public void process(Record<String, byte[]> r) {
                if (failing && "boom".equals(new String(r.value(), StandardCharsets.UTF_8))) {
                  throw new IllegalStateException("boom");
                }
                context.forward(r);
              }
            },
        "in");
    t.addProcessor("batch", () -> BatcherTest.joining(size, Duration.ofHours(1)), "fail");
    t.addStateStore(Batcher.store("pending"), "batch");
    t.addSink("out", out, new StringSerializer(), new ByteArraySerializer(), "batch");
    return StreamsApp.start(
        run,
        t,
        bootstrap,
        // An instance that failed leaves no group: the next waits this long (the least Kafka
        // takes).
        Map.of("main.consumer.session.timeout.ms", "6000"),
        stateDir,
        commitInterval,
        Batcher.tick(Duration.ofHours(1)),
        (short) 1);
  }

  private static Admin admin(String bootstrap) {
    return Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap));
  }

  private static void produce(String bootstrap, String topic, String key, String... values) {
    try (KafkaProducer<String, byte[]> p =
        new KafkaProducer<>(
            Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap),
            new StringSerializer(),
            new ByteArraySerializer())) {
      for (String v : values) {
        p.send(new ProducerRecord<>(topic, key, v.getBytes(StandardCharsets.UTF_8)));
      }
    }
  }

  private static long committed(Admin admin, String group, TopicPartition tp) throws Exception {
    OffsetAndMetadata o =
        admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get().get(tp);
    return o == null ? -1 : o.offset();
  }

  /** The records committed to the topic: its offsets count the transactions' markers too. */
  private static long records(String bootstrap, String topic) throws Exception {
    AtomicLong n = new AtomicLong();
    try (TopicRange range = TopicRange.open(bootstrap, Map.of())) {
      range.read(topic, TopicRange.all(), r -> n.incrementAndGet());
    }
    return n.get();
  }
}
