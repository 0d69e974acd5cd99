package dev.spillway.event;

import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.GroupIdNotFoundException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Reads a topic's partitions from chosen positions up to their ends as they were when the read
 * began, without joining a consumer group, so a read of a topic still written to ends. Not
 * thread-safe.
 */
public final class TopicRange implements AutoCloseable {
  /** How long closing waits for each client's requests under way. */
  private static final Duration CLOSE_WAIT = Duration.ofSeconds(5);

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
  private final Duration stall;

  private TopicRange(Admin admin, KafkaConsumer<byte[], byte[]> consumer, Duration stall) {
    this.admin = admin;
    this.consumer = consumer;
    this.stall = stall;
  }

  /**
   * An admin client and a consumer that joins no group, commits nothing, reads committed records
   * only (ends are where such a read stops) and never has a topic created by asking for it, with
   * the configured client properties; closing the range closes both.
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
                false,
                ConsumerConfig.ISOLATION_LEVEL_CONFIG,
                KafkaClients.READ_COMMITTED));
    Admin admin = Admin.create(adminProps);
    try {
      return new TopicRange(
          admin,
          new KafkaConsumer<>(
              consumerProps, new ByteArrayDeserializer(), new ByteArrayDeserializer()),
          stall(consumerProps));
    } catch (RuntimeException e) {
      admin.close();
      throw e;
    }
  }

  /**
   * How long a read waits for a partition that gives nothing before it gives up: the client's own
   * bound on a call ({@code default.api.timeout.ms}, Kafka's default unless configured).
   */
  private static Duration stall(Properties consumerProps) {
    String key = ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG;
    Object ms =
        consumerProps.getOrDefault(key, ConsumerConfig.configDef().defaultValues().get(key));
    return Duration.ofMillis(Long.parseLong(ms.toString().trim()));
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
    // Bounded: with Kafka away a client's close would otherwise wait out its requests.
    try {
      consumer.close(CLOSE_WAIT);
    } finally {
      admin.close(CLOSE_WAIT);
    }
  }

  /** Every record still in the topic. */
  public static Start all() {
    return partitions -> Map.of();
  }

  /**
   * After a consumer group's committed positions; every record when it committed none.
   *
   * @throws KafkaException when Kafka does not give the positions (unreachable, not allowed), so a
   *     backlog is never counted from the first record for a group that did commit
   */
  public Start afterCommitted(String group) {
    return partitions -> {
      Map<TopicPartition, Long> out = new HashMap<>();
      committed(group).forEach((tp, c) -> out.put(tp, c.offset()));
      return out;
    };
  }

  /**
   * A consumer group's committed positions, with their metadata; none when it committed none.
   *
   * @throws KafkaException when Kafka does not give them (unreachable, not allowed)
   */
  public Map<TopicPartition, OffsetAndMetadata> committed(String group)
      throws InterruptedException {
    Map<TopicPartition, OffsetAndMetadata> committed;
    try {
      committed = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
    } catch (ExecutionException e) {
      if (e.getCause() instanceof GroupIdNotFoundException) {
        return Map.of();
      }
      throw new KafkaException(
          "Could not read the positions consumer group "
              + group
              + " committed: "
              + e.getCause().getMessage(),
          e.getCause());
    }
    Map<TopicPartition, OffsetAndMetadata> out = new HashMap<>();
    committed.forEach(
        (tp, c) -> {
          if (c != null) {
            out.put(tp, c);
          }
        });
    return out;
  }

  /** From the first record written at or after {@code time}; a partition with none is not read. */
  public Start writtenFrom(Instant time) {
    return partitions -> {
      Map<TopicPartition, Long> out = new HashMap<>();
      listed(partitions, OffsetSpec.forTimestamp(time.toEpochMilli()))
          .forEach((tp, offset) -> out.put(tp, offset < 0 ? Long.MAX_VALUE : offset));
      return out;
    };
  }

  /**
   * Each partition's offset as {@code spec} asks: its first, its end, or the first written at a
   * time (-1 where there is none). Asked of the admin client: the consumer, asked of partitions it
   * is not assigned, warns about each.
   */
  public Map<TopicPartition, Long> offsets(Collection<TopicPartition> partitions, OffsetSpec spec)
      throws InterruptedException, ExecutionException {
    Map<TopicPartition, OffsetSpec> request = new HashMap<>();
    partitions.forEach(tp -> request.put(tp, spec));
    Map<TopicPartition, Long> out = new HashMap<>();
    admin
        .listOffsets(request, new ListOffsetsOptions(IsolationLevel.READ_COMMITTED))
        .all()
        .get()
        .forEach((tp, info) -> out.put(tp, info.offset()));
    return out;
  }

  private Map<TopicPartition, Long> listed(Collection<TopicPartition> partitions, OffsetSpec spec)
      throws InterruptedException {
    try {
      return offsets(partitions, spec);
    } catch (ExecutionException e) {
      throw new KafkaException(
          "Could not list the offsets of " + partitions + ": " + e.getCause().getMessage(),
          e.getCause());
    }
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
    Map<TopicPartition, Long> first = listed(partitions, OffsetSpec.earliest());
    Map<TopicPartition, Long> end = listed(partitions, OffsetSpec.latest());
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
    Map<TopicPartition, Long> positions = new HashMap<>();
    try {
      consumer.assign(ranges.keySet());
      ranges.forEach((tp, r) -> consumer.seek(tp, r.from()));
      long movedAt = System.nanoTime();
      while (!remaining.isEmpty()) {
        for (ConsumerRecord<byte[], byte[]> r : consumer.poll(POLL)) {
          Long stop = remaining.get(new TopicPartition(r.topic(), r.partition()));
          if (stop != null && r.offset() < stop) {
            each.accept(r);
          }
        }
        // Compacted or control records leave gaps: the position, not the last record, tells.
        boolean moved = false;
        for (TopicPartition tp : remaining.keySet()) {
          Long before = positions.get(tp);
          Long now = position(tp);
          if (now != null) {
            positions.put(tp, now);
            moved |= !now.equals(before);
          }
        }
        remaining.keySet().removeIf(tp -> positions.getOrDefault(tp, -1L) >= remaining.get(tp));
        if (moved) {
          movedAt = System.nanoTime();
        } else if (System.nanoTime() - movedAt > stall.toNanos()) {
          throw new KafkaException(stalled(remaining, positions));
        }
        if (Thread.interrupted()) {
          throw new InterruptedException();
        }
      }
    } finally {
      // The consumer serves later reads: nothing assigned may outlive this one.
      consumer.assign(List.of());
    }
  }

  /**
   * The consumer's position, or null when it is being looked up (a reset) and Kafka does not answer
   * within a poll: without a bound the lookup waits the client's whole API timeout and ends in an
   * exception that names nothing the read was at.
   */
  private Long position(TopicPartition tp) {
    try {
      return consumer.position(tp, POLL);
    } catch (org.apache.kafka.common.errors.TimeoutException e) {
      return null;
    }
  }

  private String stalled(Map<TopicPartition, Long> remaining, Map<TopicPartition, Long> positions) {
    List<String> at = new ArrayList<>();
    remaining.keySet().stream()
        .sorted(
            Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition))
        .forEach(
            tp ->
                at.add(
                    tp
                        + (positions.containsKey(tp)
                            ? " at offset " + positions.get(tp)
                            : " at an offset not known")
                        + " of "
                        + remaining.get(tp)));
    return "Kafka gave nothing more of "
        + String.join(", ", at)
        + " for "
        + (stall.toMillis() % 1000 == 0 ? stall.toSeconds() + " s" : stall.toMillis() + " ms")
        + " (its leader may be down, or the topic deleted)";
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
