package dev.spillway.sink;

import static org.assertj.core.api.Assertions.assertThat;

import dev.spillway.testing.EmbeddedInfra;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
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

/** The sink's commit against a real broker. */
class SinkWorkerCommitIT {
  @Test
  void should_commit_while_the_stops_wakeup_is_still_pending() throws Exception {
    String bootstrap = EmbeddedInfra.get().bootstrapServers();
    String topic = "commit-" + UUID.randomUUID();
    try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
      admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
    }
    try (KafkaProducer<byte[], byte[]> producer =
        new KafkaProducer<>(
            Map.of("bootstrap.servers", bootstrap),
            new ByteArraySerializer(),
            new ByteArraySerializer())) {
      producer.send(new ProducerRecord<>(topic, new byte[] {1})).get();
      producer.send(new ProducerRecord<>(topic, new byte[] {2})).get();
    }
    TopicPartition tp = new TopicPartition(topic, 0);
    try (KafkaConsumer<byte[], byte[]> consumer =
        new KafkaConsumer<>(
            Map.of(
                "bootstrap.servers",
                bootstrap,
                "group.id",
                "commit-" + UUID.randomUUID(),
                "enable.auto.commit",
                "false"),
            new ByteArrayDeserializer(),
            new ByteArrayDeserializer())) {
      consumer.assign(List.of(tp));
      // A stop's wakeup that no poll spent: the loop left between polls.
      consumer.wakeup();

      SinkWorker.commitSync(consumer, Map.of(tp, new OffsetAndMetadata(2)), Duration.ofSeconds(30));

      assertThat(consumer.committed(Set.of(tp), Duration.ofSeconds(30)).get(tp).offset())
          .isEqualTo(2);
    }
  }
}
