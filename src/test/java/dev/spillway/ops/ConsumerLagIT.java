package dev.spillway.ops;

import static org.assertj.core.api.Assertions.assertThat;

import dev.spillway.event.TopicRange;
import dev.spillway.ops.ConsumerLag.Lag;
import dev.spillway.testing.EmbeddedInfra;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.net.ServerSocket;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.Test;

/** Consumer lag read from the shared embedded Kafka. */
class ConsumerLagIT {

  /**
   * When the seeded records were written: an hour ago, whole seconds, well within the broker's
   * retention, which goes by record time.
   */
  private static final long T0 =
      Instant.now().truncatedTo(ChronoUnit.SECONDS).minus(Duration.ofHours(1)).toEpochMilli();

  @Test
  void should_count_what_each_group_has_not_committed_and_date_the_oldest() throws Exception {
    String bootstrap = EmbeddedInfra.get().bootstrapServers();
    String prefix = seed(bootstrap);

    List<Lag> lags = ConsumerLag.read(bootstrap, Map.of(), prefix);

    assertThat(lags)
        .containsExactly(
            new Lag(prefix + ".buffers.a", prefix + ".buffers.a.events", 1, 0, null, 0),
            new Lag(prefix + ".lfk.sink", prefix + ".lfk.cleanup-batches", 2, 5, T0 + 2000L, 0));

    // As the metrics read it: again and again through one range, whose consumer serves every read.
    try (TopicRange range = TopicRange.open(bootstrap, Map.of())) {
      assertThat(ConsumerLag.read(range, prefix)).isEqualTo(lags);
      assertThat(range.consumer().assignment()).as("nothing left assigned").isEmpty();
      assertThat(ConsumerLag.read(range, prefix)).isEqualTo(lags);
    }
  }

  @Test
  void should_count_a_captured_topic_no_group_reads_yet_from_its_first_record() throws Exception {
    String bootstrap = EmbeddedInfra.get().bootstrapServers();
    String prefix = seed(bootstrap);
    // A buffer left out with --only, and loose foreign keys never run: capture wrote, none read.
    String waiting = prefix + ".buffers.b.events";
    String deletes = prefix + ".lfk.deleted-records";
    // And batches of a buffer whose sink stopped before it ever committed on them.
    String batches = prefix + ".buffers.b.batches";
    List<ProducerRecord<byte[], byte[]>> written = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      written.add(new ProducerRecord<>(waiting, i % 2, T0 + i * 1000L, null, new byte[] {1}));
    }
    written.add(new ProducerRecord<>(deletes, 0, T0 + 5000L, null, new byte[] {1}));
    written.add(new ProducerRecord<>(batches, 0, T0 + 7000L, null, new byte[] {1}));
    write(
        bootstrap,
        List.of(
            new NewTopic(waiting, 2, (short) 1),
            new NewTopic(deletes, 1, (short) 1),
            new NewTopic(batches, 1, (short) 1)),
        written);

    List<Lag> lags = ConsumerLag.read(bootstrap, Map.of(), prefix);

    assertThat(lags)
        .containsExactly(
            new Lag(prefix + ".buffers.a", prefix + ".buffers.a.events", 1, 0, null, 0),
            new Lag(prefix + ".lfk.sink", prefix + ".lfk.cleanup-batches", 2, 5, T0 + 2000L, 0),
            new Lag(ConsumerLag.NO_GROUP, batches, 1, 1, T0 + 7000L, 0),
            new Lag(ConsumerLag.NO_GROUP, waiting, 2, 3, T0, 0),
            new Lag(ConsumerLag.NO_GROUP, deletes, 1, 1, T0 + 5000L, 0));
  }

  @Test
  void should_not_count_a_transaction_marker_left_behind_a_commit_as_waiting() throws Exception {
    String bootstrap = EmbeddedInfra.get().bootstrapServers();
    String prefix = "g" + UUID.randomUUID().toString().substring(0, 8);
    String batches = prefix + ".buffers.m.batches";
    TopicPartition tp = new TopicPartition(batches, 0);
    try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
      admin.createTopics(List.of(new NewTopic(batches, 1, (short) 1))).all().get();
    }
    // As Kafka Streams writes a batch: in a transaction, its commit marker at offset 1.
    try (KafkaProducer<byte[], byte[]> producer =
        new KafkaProducer<>(
            Map.of("bootstrap.servers", bootstrap, "transactional.id", prefix + "-tx"),
            new ByteArraySerializer(),
            new ByteArraySerializer())) {
      producer.initTransactions();
      producer.beginTransaction();
      producer.send(new ProducerRecord<>(batches, 0, T0, null, new byte[] {1})).get();
      producer.commitTransaction();
    }
    // A sink that stopped having committed the batch, not the marker after it.
    commit(bootstrap, prefix + ".buffers.m", Map.of(tp, 1L));

    assertThat(ConsumerLag.read(bootstrap, Map.of(), prefix))
        .containsExactly(new Lag(prefix + ".buffers.m", batches, 1, 0, null, 0));
  }

  @Test
  void should_publish_the_lag_per_group_and_topic_on_metrics_and_follow_commits() throws Exception {
    String bootstrap = EmbeddedInfra.get().bootstrapServers();
    String prefix = seed(bootstrap);
    PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    Clock clock = Clock.fixed(Instant.ofEpochMilli(T0 + 62_000L), ZoneOffset.UTC);
    String sink =
        "{group=\"" + prefix + ".lfk.sink\",topic=\"" + prefix + ".lfk.cleanup-batches\"}";
    String buffer =
        "{group=\"" + prefix + ".buffers.a\",topic=\"" + prefix + ".buffers.a.events\"}";

    try (ConsumerLagGauges gauges =
        ConsumerLagGauges.start(bootstrap, Map.of(), prefix, registry, clock)) {
      gauges.refresh();
      assertThat(registry.scrape())
          .contains("spillway_consumer_lag_records" + sink + " 5.0")
          .contains("spillway_consumer_lag_seconds" + sink + " 60.0")
          .contains("spillway_consumer_lag_records" + buffer + " 0.0")
          .contains("spillway_consumer_lag_seconds" + buffer + " 0.0");

      // The sink settles everything: the next read shows it caught up.
      commit(
          bootstrap,
          prefix + ".lfk.sink",
          Map.of(
              new TopicPartition(prefix + ".lfk.cleanup-batches", 0), 5L,
              new TopicPartition(prefix + ".lfk.cleanup-batches", 1), 2L));
      gauges.refresh();
      assertThat(registry.scrape())
          .contains("spillway_consumer_lag_records" + sink + " 0.0")
          .contains("spillway_consumer_lag_seconds" + sink + " 0.0");
    }
  }

  @Test
  void should_date_the_first_record_still_there_when_retention_deleted_the_one_looked_up()
      throws Exception {
    String bootstrap = EmbeddedInfra.get().bootstrapServers();
    String prefix = seed(bootstrap);
    TopicPartition p0 = new TopicPartition(prefix + ".lfk.cleanup-batches", 0);
    TopicPartition p1 = new TopicPartition(prefix + ".lfk.cleanup-batches", 1);
    // Positions and ends as a read looked them up, then retention deletes records behind it.
    Map<TopicPartition, Long> at = Map.of(p0, 2L, p1, 0L);
    Map<TopicPartition, Long> ends = Map.of(p0, 5L, p1, 2L);
    try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
      admin
          .deleteRecords(
              Map.of(p0, RecordsToDelete.beforeOffset(4), p1, RecordsToDelete.beforeOffset(2)))
          .all()
          .get();
    }

    try (TopicRange range = TopicRange.open(bootstrap, Map.of())) {
      assertThat(ConsumerLag.oldest(range.consumer(), at, ends))
          .as("offset 4 of partition 0, the first still there; partition 1 has nothing left")
          .isEqualTo(new ConsumerLag.Oldest(T0 + 4000L, Set.of(p1)));
      assertThat(ConsumerLag.oldest(range.consumer(), Map.of(p1, 0L), ends))
          .isEqualTo(new ConsumerLag.Oldest(null, Set.of(p1)));
      // A partition that gives nothing in time (here one the topic lacks) may hold an older one.
      TopicPartition silent = new TopicPartition(prefix + ".lfk.cleanup-batches", 7);
      assertThat(
              ConsumerLag.oldest(
                      range.consumer(), Map.of(p0, 2L, silent, 0L), Map.of(p0, 5L, silent, 1L))
                  .millis())
          .as("not the age of what the other partitions gave")
          .isNull();
      assertThat(range.consumer().assignment()).as("nothing left assigned").isEmpty();
      assertThat(range.consumer().paused()).as("nothing left paused").isEmpty();
    }
  }

  @Test
  void should_withdraw_the_lag_series_when_kafka_cannot_be_read() throws Exception {
    PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    int closedPort;
    try (ServerSocket s = new ServerSocket(0)) {
      closedPort = s.getLocalPort();
    }
    try (ConsumerLagGauges gauges =
        ConsumerLagGauges.start(
            "127.0.0.1:" + closedPort,
            Map.of("default.api.timeout.ms", "1000", "request.timeout.ms", "500"),
            "gone",
            registry,
            Clock.systemUTC())) {
      gauges.publish(List.of(new Lag("gone.lfk.sink", "gone.lfk.cleanup-batches", 1, 3, T0, 1)));
      assertThat(registry.scrape())
          .contains("spillway_consumer_lag_records{group=\"gone.lfk.sink\"");

      gauges.refresh();

      assertThat(registry.scrape()).doesNotContain("gone.lfk.sink");
    }
  }

  /**
   * Two topics under a new prefix: the sink has settled two batches of partition 0 and none of
   * partition 1 (behind from its first record, though the group never committed on it); the
   * buffer's application is up to date; groups of other prefixes are no business of this one.
   */
  private static String seed(String bootstrap) throws Exception {
    String prefix = "g" + UUID.randomUUID().toString().substring(0, 8);
    String batches = prefix + ".lfk.cleanup-batches";
    String events = prefix + ".buffers.a.events";
    List<ProducerRecord<byte[], byte[]>> written = new ArrayList<>();
    for (int i = 0; i < 5; i++) {
      written.add(new ProducerRecord<>(batches, 0, T0 + i * 1000L, null, new byte[] {1}));
    }
    for (int i = 0; i < 2; i++) {
      written.add(new ProducerRecord<>(batches, 1, T0 + 60_000L, null, new byte[] {1}));
    }
    written.add(new ProducerRecord<>(events, 0, T0, null, new byte[] {1}));
    write(
        bootstrap,
        List.of(new NewTopic(batches, 2, (short) 1), new NewTopic(events, 1, (short) 1)),
        written);
    commit(bootstrap, prefix + ".lfk.sink", Map.of(new TopicPartition(batches, 0), 2L));
    commit(bootstrap, prefix + ".buffers.a", Map.of(new TopicPartition(events, 0), 1L));
    commit(bootstrap, "other." + prefix, Map.of(new TopicPartition(events, 0), 0L));
    // Nor is one of a deployment whose prefix extends this one.
    commit(bootstrap, prefix + ".staging.lfk.sink", Map.of(new TopicPartition(events, 0), 0L));
    return prefix;
  }

  /** Creates the topics, then writes the records, each acknowledged. */
  private static void write(
      String bootstrap, List<NewTopic> topics, List<ProducerRecord<byte[], byte[]>> records)
      throws Exception {
    try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
      admin.createTopics(topics).all().get();
    }
    try (KafkaProducer<byte[], byte[]> producer =
        new KafkaProducer<>(
            Map.of("bootstrap.servers", bootstrap),
            new ByteArraySerializer(),
            new ByteArraySerializer())) {
      for (ProducerRecord<byte[], byte[]> r : records) {
        producer.send(r).get();
      }
    }
  }

  private static void commit(String bootstrap, String group, Map<TopicPartition, Long> offsets) {
    try (KafkaConsumer<byte[], byte[]> consumer =
        new KafkaConsumer<>(
            Map.of("bootstrap.servers", bootstrap, "group.id", group),
            new ByteArrayDeserializer(),
            new ByteArrayDeserializer())) {
      consumer.assign(offsets.keySet());
      offsets.forEach((tp, o) -> consumer.commitSync(Map.of(tp, new OffsetAndMetadata(o))));
    }
  }
}
