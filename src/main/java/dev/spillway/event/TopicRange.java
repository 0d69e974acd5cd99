package dev.spillway.event;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Reads a topic's partitions from chosen positions up to their ends as they were when the read
 * began, without joining a consumer group, so a read of a topic still written to ends. Not
 * thread-safe.
 */
public final class TopicRange implements AutoCloseable {
  private static final Duration POLL = Duration.ofMillis(200);

  /**
   * Where a read starts on each partition; a partition left out starts at its first record, one
   * given a position at or past its end is not read.
   */
  @FunctionalInterface
  public interface Start {
    Map<TopicPartition, Long> positions(List<TopicPartition> partitions)
        throws InterruptedException;
  }

  private final Admin admin;
  private final KafkaConsumer<byte[], byte[]> consumer;

  private TopicRange(Admin admin, KafkaConsumer<byte[], byte[]> consumer) {
    this.admin = admin;
    this.consumer = consumer;
  }

  /**
   * An admin client and a consumer that joins no group, commits nothing and never has a topic
   * created by asking for it, with the configured client properties; closing the range closes both.
   */
  public static TopicRange open(String bootstrapServers, Map<String, String> configured) {
    Map<String, Object> adminProps = new HashMap<>(configured);
    adminProps.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers);
    Properties consumerProps =
        KafkaClients.properties(
            Map.of(),
            configured,
            Map.of(
                ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG,
                bootstrapServers,
                ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG,
                false,
                // A position whose record retention deleted meanwhile goes on from the first
                // record still there, rather than jumping to the end past those not read.
                ConsumerConfig.AUTO_OFFSET_RESET_CONFIG,
                "earliest",
                ConsumerConfig.ALLOW_AUTO_CREATE_TOPICS_CONFIG,
                false));
    Admin admin = Admin.create(adminProps);
    try {
      return new TopicRange(
          admin,
          new KafkaConsumer<>(
              consumerProps, new ByteArrayDeserializer(), new ByteArrayDeserializer()));
    } catch (RuntimeException e) {
      admin.close();
      throw e;
    }
  }

  public Admin admin() {
    return admin;
  }

  /** The consumer, for reads of its own; it is left with nothing assigned after each read. */
  public KafkaConsumer<byte[], byte[]> consumer() {
    return consumer;
  }

  @Override
  public void close() {
    try (admin) {
      consumer.close();
    }
  }

  /** Every record still in the topic. */
  public static Start all() {
    return partitions -> Map.of();
  }

  /** After a consumer group's committed positions; every record when it committed none. */
  public Start afterCommitted(String group) {
    return partitions -> {
      Map<TopicPartition, OffsetAndMetadata> committed;
      try {
        committed = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
      } catch (ExecutionException e) {
        return Map.of();
      }
      Map<TopicPartition, Long> out = new HashMap<>();
      committed.forEach(
          (tp, c) -> {
            if (c != null) {
              out.put(tp, c.offset());
            }
          });
      return out;
    };
  }

  /** What a read does with each record; it may block, and be interrupted. */
  @FunctionalInterface
  public interface Each {
    void accept(ConsumerRecord<byte[], byte[]> record) throws InterruptedException;
  }

  /** Records from {@code start} to the partitions' ends; nothing when the topic does not exist. */
  public void read(String topic, Start start, Each each) throws InterruptedException {
    read(ranges(partitions(topic), start), each);
  }

  /**
   * As {@link #read}, in the topic's order: one partition after the other, each from its first
   * record to its last, so a caller can act on each record without gathering them to sort. Every
   * partition's end is taken before the first is read, so what the caller writes to the topic
   * meanwhile is not read.
   */
  public void readInOrder(String topic, Start start, Each each) throws InterruptedException {
    Map<TopicPartition, Range> ranges = ranges(partitions(topic), start);
    List<TopicPartition> ordered = new ArrayList<>(ranges.keySet());
    ordered.sort(Comparator.comparingInt(TopicPartition::partition));
    for (TopicPartition tp : ordered) {
      read(Map.of(tp, ranges.get(tp)), each);
    }
  }

  /** Offsets {@code from} up to, not including, {@code end}. */
  private record Range(long from, long end) {}

  /** Each partition's offsets to read, from {@code start} (or its first) up to its end now. */
  private Map<TopicPartition, Range> ranges(List<TopicPartition> partitions, Start start)
      throws InterruptedException {
    Map<TopicPartition, Range> out = new HashMap<>();
    if (partitions.isEmpty()) {
      return out;
    }
    Map<TopicPartition, Long> first = consumer.beginningOffsets(partitions);
    Map<TopicPartition, Long> end = consumer.endOffsets(partitions);
    Map<TopicPartition, Long> from = start.positions(partitions);
    for (TopicPartition tp : partitions) {
      long position = Math.max(first.get(tp), from.getOrDefault(tp, 0L));
      if (position < end.get(tp)) {
        out.put(tp, new Range(position, end.get(tp)));
      }
    }
    return out;
  }

  private void read(Map<TopicPartition, Range> ranges, Each each) throws InterruptedException {
    if (ranges.isEmpty()) {
      return;
    }
    Map<TopicPartition, Long> remaining = new HashMap<>();
    ranges.forEach((tp, r) -> remaining.put(tp, r.end()));
    try {
      consumer.assign(ranges.keySet());
      ranges.forEach((tp, r) -> consumer.seek(tp, r.from()));
      while (!remaining.isEmpty()) {
        for (ConsumerRecord<byte[], byte[]> r : consumer.poll(POLL)) {
          Long stop = remaining.get(new TopicPartition(r.topic(), r.partition()));
          if (stop != null && r.offset() < stop) {
            each.accept(r);
          }
        }
        // Compacted or control records leave gaps: the position, not the last record, tells.
        remaining.keySet().removeIf(tp -> consumer.position(tp) >= remaining.get(tp));
        if (Thread.interrupted()) {
          throw new InterruptedException();
        }
      }
    } finally {
      // The consumer serves later reads: nothing assigned may outlive this one.
      consumer.assign(List.of());
    }
  }

  /** The topic's partitions; none when it does not exist. */
  public List<TopicPartition> partitions(String topic) throws InterruptedException {
    try {
      TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
      return d.partitions().stream().map(p -> new TopicPartition(topic, p.partition())).toList();
    } catch (ExecutionException e) {
      if (e.getCause() instanceof UnknownTopicOrPartitionException) {
        return List.of();
      }
      throw new IllegalStateException(
          "Could not describe topic " + topic + ": " + e.getCause().getMessage(), e.getCause());
    }
  }
}
