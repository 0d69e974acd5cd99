package dev.spillway.ops;

import static org.assertj.core.api.Assertions.assertThat;

import dev.spillway.ops.ConsumerLag.Lag;
import dev.spillway.testing.EmbeddedInfra;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
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

  @Test
  void should_count_what_each_group_has_not_committed_and_date_the_oldest() throws Exception {
    String bootstrap = EmbeddedInfra.get().bootstrapServers();
    String prefix = "g" + UUID.randomUUID().toString().substring(0, 8);
    String batches = prefix + ".lfk.cleanup-batches";
    String events = prefix + ".buffers.a.events";
    try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
      admin
          .createTopics(
              List.of(new NewTopic(batches, 2, (short) 1), new NewTopic(events, 1, (short) 1)))
          .all()
          .get();
    }
    long t0 = Instant.parse("2026-11-24T08:00:00Z").toEpochMilli();
    try (KafkaProducer<byte[], byte[]> producer =
        new KafkaProducer<>(
            Map.of("bootstrap.servers", bootstrap),
            new ByteArraySerializer(),
            new ByteArraySerializer())) {
      for (int i = 0; i < 5; i++) {
        producer.send(new ProducerRecord<>(batches, 0, t0 + i * 1000L, null, new byte[] {1})).get();
      }
      for (int i = 0; i < 2; i++) {
        producer.send(new ProducerRecord<>(batches, 1, t0 + 60_000L, null, new byte[] {1})).get();
      }
      producer.send(new ProducerRecord<>(events, 0, t0, null, new byte[] {1})).get();
    }
    // The sink has settled two batches of partition 0 and none of partition 1 (behind from its
    // first record, though the group never committed on it); the buffer's
    // application is up to date; a group of another prefix is no business of this one.
    commit(bootstrap, prefix + ".lfk.sink", Map.of(new TopicPartition(batches, 0), 2L));
    commit(bootstrap, prefix + ".buffers.a", Map.of(new TopicPartition(events, 0), 1L));
    commit(bootstrap, "other." + prefix, Map.of(new TopicPartition(events, 0), 0L));

    List<Lag> lags = ConsumerLag.read(bootstrap, Map.of(), prefix);

    assertThat(lags)
        .containsExactly(
            new Lag(prefix + ".buffers.a", events, 1, 0, null, 0),
            new Lag(prefix + ".lfk.sink", batches, 2, 5, t0 + 2000L, 0));
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
