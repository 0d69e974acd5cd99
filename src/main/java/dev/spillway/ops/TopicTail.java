package dev.spillway.ops;

import dev.spillway.event.KafkaClients;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Reads what is appended to some topics after it was opened, without joining a consumer group, as
 * the sink does: committed records only. Used to show or measure what a pipeline publishes. Not
 * thread-safe.
 */
public final class TopicTail implements AutoCloseable {
  private final KafkaConsumer<byte[], byte[]> consumer;
  private final Map<TopicPartition, Long> opened = new java.util.HashMap<>();

  public TopicTail(
      String bootstrapServers, Map<String, String> clientProperties, List<String> topics) {
    Map<String, Object> props = new java.util.HashMap<>(clientProperties);
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers);
    props.put(ConsumerConfig.CLIENT_ID_CONFIG, "spillway-tail-" + UUID.randomUUID());
    props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
    props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 5000);
    props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, KafkaClients.READ_COMMITTED);
    consumer = new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    List<TopicPartition> partitions = new ArrayList<>();
    for (String topic : topics) {
      for (PartitionInfo p : consumer.partitionsFor(topic, Duration.ofSeconds(30))) {
        partitions.add(new TopicPartition(topic, p.partition()));
      }
    }
    consumer.assign(partitions);
    consumer.seekToEnd(partitions);
    // Resolve the end positions now, so records appended from here on are all read.
    partitions.forEach(p -> opened.put(p, consumer.position(p)));
  }

  /**
   * Records appended to the topics since this tail was opened, from the brokers' log end offsets:
   * what is in Kafka, without fetching it.
   */
  public long appendedSinceOpen() {
    long appended = 0;
    for (Map.Entry<TopicPartition, Long> e :
        consumer.endOffsets(opened.keySet(), Duration.ofSeconds(10)).entrySet()) {
      appended += e.getValue() - opened.get(e.getKey());
    }
    return appended;
  }

  public List<ConsumerRecord<byte[], byte[]>> poll(Duration timeout) {
    List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
    consumer.poll(timeout).forEach(out::add);
    return out;
  }

  @Override
  public void close() {
    consumer.close(Duration.ofSeconds(5));
  }
}
