package dev.spillway.event;

import static org.assertj.core.api.Assertions.assertThat;

import dev.spillway.testing.EmbeddedInfra;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** Reading a topic's range on the shared embedded Kafka. */
class TopicRangeIT {
  private String bootstrap;
  private String topic;
  private KafkaProducer<byte[], byte[]> producer;

  @BeforeEach
  void topic() throws Exception {
    bootstrap = EmbeddedInfra.get().bootstrapServers();
    topic = "range-" + UUID.randomUUID().toString().substring(0, 8);
    try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
      admin.createTopics(List.of(new NewTopic(topic, 3, (short) 1))).all().get();
    }
    producer =
        new KafkaProducer<>(
            Map.of("bootstrap.servers", bootstrap),
            new ByteArraySerializer(),
            new ByteArraySerializer());
  }

  @AfterEach
  void close() {
    producer.close();
  }

  private void write(int partition, String value) throws InterruptedException {
    try {
      producer.send(new ProducerRecord<>(topic, partition, null, value.getBytes())).get();
    } catch (ExecutionException e) {
      throw new IllegalStateException(e.getCause());
    }
  }

  @Test
  void should_read_in_order_up_to_the_ends_every_partition_had_when_the_read_began()
      throws Exception {
    write(2, "c");
    write(1, "b");
    write(0, "a");
    write(2, "d");
    List<String> read = new ArrayList<>();

    try (TopicRange range = TopicRange.open(bootstrap, Map.of())) {
      range.readInOrder(
          topic,
          TopicRange.all(),
          r -> {
            read.add(r.partition() + ":" + new String(r.value()));
            // Written to a partition not read yet: past the end it had when the read began.
            if (r.partition() == 0) {
              write(1, "late");
              write(2, "late");
            }
          });
    }

    assertThat(read).containsExactly("0:a", "1:b", "2:c", "2:d");
  }
}
