package dev.spillway.streams;

import static org.assertj.core.api.Assertions.assertThat;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.slf4j.LoggerFactory;

class StreamsAppTest {
  @TempDir Path dir;

  private static StreamsConfig config(Map<String, String> configured) {
    return config(configured, (short) 1);
  }

  private static StreamsConfig config(Map<String, String> configured, short replicationFactor) {
    return new StreamsConfig(
        StreamsApp.properties(
            "app",
            "k:9092",
            configured,
            Path.of("state"),
            Duration.ofMillis(100),
            Duration.ofMillis(50),
            replicationFactor));
  }

  @Test
  void should_make_its_changelogs_of_three_replicas_or_more_need_two_in_sync() {
    String minInSync = StreamsConfig.topicPrefix("min.insync.replicas");

    assertThat(config(Map.of(), (short) 3).originals()).containsEntry(minInSync, "2");
    assertThat(config(Map.of(), (short) 2).originals()).doesNotContainKey(minInSync);
    assertThat(config(Map.of(minInSync, "3"), (short) 3).originals()).containsEntry(minInSync, "3");
  }

  @Test
  void should_take_a_commit_its_producer_can_only_abort_for_kafka_out_of_reach() {
    // As Kafka Streams 4.3 reports a commit after sends that expired while the broker was away.
    StreamsException expired =
        new StreamsException(
            "Error encountered trying to commit a transaction [stream-thread [a-StreamThread-1]]",
            new KafkaException(
                "The client hasn't received acknowledgment for some previously sent messages and"
                    + " can no longer retry them. It is safe to abort the transaction and"
                    + " continue."));

    assertThat(StreamsApp.kafkaOutOfReach(expired)).isTrue();
    assertThat(StreamsApp.kafkaOutOfReach(new StreamsException(new TimeoutException("t"))))
        .isTrue();
    assertThat(
            StreamsApp.kafkaOutOfReach(
                new StreamsException("processing failed", new IllegalStateException("a bug"))))
        .as("a failure a new thread would meet again")
        .isFalse();
    assertThat(StreamsApp.kafkaOutOfReach(new StreamsException(new KafkaException("fenced"))))
        .isFalse();
  }

  @Test
  void should_name_the_topics_its_topology_writes_to_by_name_and_its_stores_changelogs() {
    Topology topology = new Topology();
    topology.addSource("in", "in");
    topology.addSink("batches", "a.batches", "in");
    topology.addSink("dlq", "a.dlq", "in");
    topology.addSink("again", "a.batches", "in");
    topology.addSink("chosen", (key, value, context) -> "by-record", "in");
    topology.addProcessor(
        "batcher",
        () ->
            new org.apache.kafka.streams.processor.api.Processor<Object, Object, Object, Object>() {
              @Override
              public void process(
                  org.apache.kafka.streams.processor.api.Record<Object, Object> r) {}
            },
        "in");
    topology.addStateStore(
        org.apache.kafka.streams.state.Stores.keyValueStoreBuilder(
            org.apache.kafka.streams.state.Stores.inMemoryKeyValueStore("pending"),
            org.apache.kafka.common.serialization.Serdes.ByteArray(),
            org.apache.kafka.common.serialization.Serdes.ByteArray()),
        "batcher");

    assertThat(StreamsApp.written(topology, "app"))
        .containsExactly("a.batches", "a.dlq", "app-pending-changelog");
  }

  @Test
  void should_give_its_producers_spillway_s_linger_over_the_streams_default() {
    Map<String, Object> producer = config(Map.of()).getProducerConfigs("c");

    assertThat(producer.get(ProducerConfig.LINGER_MS_CONFIG)).hasToString("5");
    assertThat(producer.get(ProducerConfig.ACKS_CONFIG)).isEqualTo("all");
  }

  @Test
  void should_wait_for_input_no_longer_than_half_its_tick() {
    assertThat(config(Map.of()).getLong(StreamsConfig.POLL_MS_CONFIG)).isEqualTo(25L);
    assertThat(
            new StreamsConfig(
                    StreamsApp.properties(
                        "app",
                        "k:9092",
                        Map.of(),
                        Path.of("state"),
                        Duration.ofMillis(100),
                        Duration.ofSeconds(1),
                        (short) 1))
                .getLong(StreamsConfig.POLL_MS_CONFIG))
        .isEqualTo(100L);
  }

  @Test
  void should_let_configured_properties_tune_its_producers() {
    assertThat(
            config(Map.of("linger.ms", "20"))
                .getProducerConfigs("c")
                .get(ProducerConfig.LINGER_MS_CONFIG))
        .hasToString("20");
    assertThat(
            config(Map.of("linger.ms", "20", "producer.linger.ms", "50"))
                .getProducerConfigs("c")
                .get(ProducerConfig.LINGER_MS_CONFIG))
        .hasToString("50");
  }

  @Test
  void should_build_its_clients_without_a_configuration_warning() throws Exception {
    Logger streams = (Logger) LoggerFactory.getLogger(StreamsConfig.class);
    ListAppender<ILoggingEvent> logged = new ListAppender<>();
    logged.start();
    streams.addAppender(logged);
    Topology topology = new Topology();
    topology.addSource("in", "in");
    try {
      // Builds the application's clients and their settings; connects to nothing.
      new KafkaStreams(
              topology,
              StreamsApp.properties(
                  "app",
                  "127.0.0.1:1",
                  Map.of(),
                  Files.createTempDirectory(dir, "state"),
                  Duration.ofMillis(100),
                  Duration.ofMillis(50),
                  (short) 1))
          .close(Duration.ofSeconds(5));
    } finally {
      streams.detachAppender(logged);
    }

    assertThat(logged.list)
        .filteredOn(e -> e.getLevel().isGreaterOrEqual(Level.WARN))
        .extracting(ILoggingEvent::getFormattedMessage)
        .isEmpty();
  }
}
