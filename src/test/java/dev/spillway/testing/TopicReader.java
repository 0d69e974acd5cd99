package dev.spillway.testing;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.function.Predicate;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Reads a topic's committed records from the beginning until a condition holds or a deadline
 * passes.
 */
public final class TopicReader {
  private TopicReader() {}

  /**
   * Returns every record read until {@code done} accepts the list read so far; fails with the count
   * read when the deadline passes first.
   */
  public static List<ConsumerRecord<byte[], byte[]>> readUntil(
      String bootstrap,
      String topic,
      Predicate<List<ConsumerRecord<byte[], byte[]>>> done,
      Duration timeout) {
    Map<String, Object> props =
        Map.of(
            ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG,
            bootstrap,
            ConsumerConfig.GROUP_ID_CONFIG,
            "test-reader-" + UUID.randomUUID(),
            ConsumerConfig.AUTO_OFFSET_RESET_CONFIG,
            "earliest",
            ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG,
            false,
            // As the sink reads the Streams applications' transactional output.
            ConsumerConfig.ISOLATION_LEVEL_CONFIG,
            "read_committed");
    List<ConsumerRecord<byte[], byte[]>> read = new ArrayList<>();
    try (KafkaConsumer<byte[], byte[]> consumer =
        new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
      consumer.subscribe(List.of(topic));
      long deadline = System.nanoTime() + timeout.toNanos();
      while (!done.test(read)) {
        if (System.nanoTime() > deadline) {
          throw new AssertionError(
              "Read " + read.size() + " records from " + topic + " before the deadline");
        }
        consumer.poll(Duration.ofMillis(100)).forEach(read::add);
      }
    }
    return read;
  }

  public static List<ConsumerRecord<byte[], byte[]>> readAtLeast(
      String bootstrap, String topic, int count, Duration timeout) {
    return readUntil(bootstrap, topic, r -> r.size() >= count, timeout);
  }
}
