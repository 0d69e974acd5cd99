package dev.spillway.streams;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

import dev.spillway.testing.EmbeddedInfra;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.ProcessorSupplier;
import org.apache.kafka.streams.processor.api.Record;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Starting a Streams application on the shared embedded Kafka. */
class StreamsAppIT {
  @TempDir Path dir;

  private final String bootstrap = EmbeddedInfra.get().bootstrapServers();

  @Test
  void should_say_why_an_application_failing_as_it_starts_failed_without_waiting_a_minute()
      throws Exception {
    String run = "failing-" + UUID.randomUUID();
    Topology t = readingNewTopic(run, Refusing::new);

    // What this bounds is a hang, not a speed: the start waited its full minute, then said only
    // that it had not started.
    assertTimeoutPreemptively(
        Duration.ofSeconds(45),
        () ->
            assertThatThrownBy(
                    () ->
                        StreamsApp.start(
                            run,
                            t,
                            bootstrap,
                            Map.of(),
                            dir,
                            Duration.ofMillis(100),
                            Duration.ofMillis(50),
                            (short) 1))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageStartingWith("Streams application " + run + " failed: ")
                .hasMessageContaining("no grant to write here"));
  }

  @Test
  void should_fail_saying_so_once_a_topic_it_reads_stays_missing() throws Exception {
    String run = "deleted-" + UUID.randomUUID();
    Topology t = readingNewTopic(run, Passing::new);
    try (StreamsApp app =
        StreamsApp.start(
            run,
            t,
            bootstrap,
            Map.of(),
            dir,
            Duration.ofMillis(100),
            Duration.ofMillis(50),
            (short) 1)) {
      try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
        admin.deleteTopics(List.of(run + ".in")).all().get();
      }

      await()
          .dontCatchUncaughtExceptions() // the stream threads' own, which the handler answers
          .atMost(StreamsApp.MISSING_SOURCE_GRACE.plusSeconds(60))
          .until(() -> app.failure().isPresent());
      assertThat(app.failure().get())
          .startsWith(
              "Streams application "
                  + run
                  + " failed: a topic it reads has been missing for 30 s (")
          .endsWith("); deleted while Spillway ran? A start makes it again");
    }
  }

  @Test
  void should_fail_saying_so_once_a_topic_it_writes_is_missing() throws Exception {
    String run = "unwritable-" + UUID.randomUUID();
    Topology t = readingNewTopic(run, Forwarding::new);
    try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
      admin.createTopics(List.of(new NewTopic(run + ".out", 1, (short) 1))).all().get();
    }
    t.addSink(
        "out", run + ".out", new ByteArraySerializer(), new ByteArraySerializer(), "processor");
    assertThat(failureOnceDeleted(run, t, run + ".out"))
        .startsWith(
            "Streams application "
                + run
                + " failed: topic "
                + run
                + ".out it writes to is missing;")
        .endsWith("deleted while Spillway ran? A start makes it again");
  }

  @Test
  void should_fail_saying_so_once_a_changelog_of_its_store_is_missing() throws Exception {
    String run = "unlogged-" + UUID.randomUUID();
    Topology t = readingNewTopic(run, Storing::new);
    t.addStateStore(
        Changelogs.shortLivedStore(
            "waiting", org.apache.kafka.common.serialization.Serdes.ByteArray()),
        "processor");
    String changelog = run + "-waiting-changelog";
    // Made again empty at a start, it would have lost what waited in the store: told, not retried
    // as Kafka out of reach.
    assertThat(failureOnceDeleted(run, t, changelog))
        .startsWith(
            "Streams application "
                + run
                + " failed: topic "
                + changelog
                + " it writes to is"
                + " missing;");
  }

  /**
   * Starts {@code t} as application {@code run}, deletes {@code topic}, writes a record to {@code
   * <run>.in} and gives the failure the application then reports.
   */
  private String failureOnceDeleted(String run, Topology t, String topic) throws Exception {
    // Short waits for a topic's metadata and for a task to make progress, so the thread gives up
    // on the missing topic in seconds rather than minutes.
    Map<String, String> quick = Map.of("task.timeout.ms", "1000", "producer.max.block.ms", "1000");
    try (StreamsApp app =
        StreamsApp.start(
            run,
            t,
            bootstrap,
            quick,
            dir,
            Duration.ofMillis(100),
            Duration.ofMillis(50),
            (short) 1)) {
      try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
        admin.deleteTopics(List.of(topic)).all().get();
      }
      try (KafkaProducer<byte[], byte[]> producer =
          new KafkaProducer<>(
              Map.of("bootstrap.servers", bootstrap),
              new ByteArraySerializer(),
              new ByteArraySerializer())) {
        producer.send(new ProducerRecord<>(run + ".in", new byte[] {1}, new byte[] {1})).get();
      }
      await()
          .dontCatchUncaughtExceptions()
          .atMost(Duration.ofSeconds(60))
          .until(() -> app.failure().isPresent());
      return app.failure().get();
    }
  }

  /** A processor keeping every record in its store {@code waiting}. */
  private static final class Storing implements Processor<byte[], byte[], byte[], byte[]> {
    private org.apache.kafka.streams.state.KeyValueStore<byte[], byte[]> store;

    @Override
    public void init(ProcessorContext<byte[], byte[]> context) {
      store = context.getStateStore("waiting");
    }

    @Override
    public void process(Record<byte[], byte[]> r) {
      store.put(r.key(), r.value());
    }
  }

  /** A topology of one processor reading topic {@code <run>.in}, made here. */
  private Topology readingNewTopic(
      String run, ProcessorSupplier<byte[], byte[], byte[], byte[]> processor) throws Exception {
    try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
      admin.createTopics(List.of(new NewTopic(run + ".in", 1, (short) 1))).all().get();
    }
    Topology t = new Topology();
    t.addSource("in", new ByteArrayDeserializer(), new ByteArrayDeserializer(), run + ".in");
    t.addProcessor("processor", processor, "in");
    return t;
  }

  /** A processor that passes nothing on. */
  private static final class Passing implements Processor<byte[], byte[], byte[], byte[]> {
    @Override
    public void process(Record<byte[], byte[]> r) {}
  }

  /** A processor that passes every record on. */
  private static final class Forwarding implements Processor<byte[], byte[], byte[], byte[]> {
    private ProcessorContext<byte[], byte[]> context;

    @Override
    public void init(ProcessorContext<byte[], byte[]> context) {
      this.context = context;
    }

    @Override
    public void process(Record<byte[], byte[]> r) {
      context.forward(r);
    }
  }

  /** A processor whose task cannot start, as one denied what it needs. */
  private static final class Refusing implements Processor<byte[], byte[], byte[], byte[]> {
    @Override
    public void init(ProcessorContext<byte[], byte[]> context) {
      throw new IllegalStateException("no grant to write here");
    }

    @Override
    public void process(Record<byte[], byte[]> r) {}
  }
}
