package dev.spillway.lfk;

import dev.spillway.event.CleanupBatch;
import dev.spillway.event.DeletedRecord;
import dev.spillway.event.EventSerdes;
import dev.spillway.event.Pipeline;
import dev.spillway.event.TableName;
import dev.spillway.event.Topics;
import dev.spillway.streams.Batcher;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.function.BiConsumer;
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
 * The loose-foreign-key backlog per parent table, read from Kafka: deleted records the batcher has
 * not taken yet, those waiting in its store for their batch, cleanup batches not yet settled, and
 * batches delayed after repeated attempts. Counted from the committed positions of the pipeline's
 * consumer groups, so it is exact when nothing moves and may briefly count a record twice while it
 * passes from one stage to the next.
 */
public final class LfkBacklog {
  private static final Duration POLL = Duration.ofMillis(200);

  /**
   * @param pending deleted parent rows whose children are not cleaned up yet
   * @param oldestCommitMicros commit time of the oldest pending delete, 0 when none is pending
   * @param rescheduled pending rows delayed after repeated unfinished runs
   */
  public record Parent(
      String database, String table, long pending, long oldestCommitMicros, long rescheduled) {}

  private final Map<String, long[]> counts = new TreeMap<>();

  private LfkBacklog() {}

  /** Reads the backlog; empty when nothing was ever captured. */
  public static List<Parent> read(
      String bootstrapServers, Map<String, String> kafkaProperties, Topics topics)
      throws InterruptedException {
    LfkBacklog backlog = new LfkBacklog();
    String app = topics.streamsApplication(Pipeline.LFK, LfkPipeline.STREAMS_NAME);
    Map<String, Object> common = new HashMap<>(kafkaProperties);
    common.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers);
    Properties consumerProps = new Properties();
    consumerProps.putAll(common);
    consumerProps.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
    try (Admin admin = Admin.create(common);
        KafkaConsumer<byte[], byte[]> consumer =
            new KafkaConsumer<>(
                consumerProps, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
      Reader reader = new Reader(admin, consumer);
      reader.readUncommitted(
          topics.deletedRecords(),
          app,
          (k, v) -> backlog.addDeleted(EventSerdes.decodeDeletedRecord(v)));
      Map<String, byte[]> store = new HashMap<>();
      reader.readAll(
          app + "-" + LfkTopology.PENDING_STORE + "-changelog",
          (k, v) -> {
            if (v == null) {
              store.remove(new String(k, java.nio.charset.StandardCharsets.UTF_8));
            } else {
              store.put(new String(k, java.nio.charset.StandardCharsets.UTF_8), v);
            }
          });
      store.forEach(
          (k, v) -> {
            if (Batcher.isEntry(k)) {
              backlog.addDeleted(EventSerdes.decodeDeletedRecord(v));
            }
          });
      reader.readUncommitted(
          topics.cleanupBatches(),
          topics.sinkGroup(Pipeline.LFK),
          (k, v) -> backlog.addBatch(EventSerdes.decodeCleanupBatch(v), false));
      reader.readUncommitted(
          topics.delayed(Pipeline.LFK),
          topics.delayGroup(Pipeline.LFK),
          (k, v) -> backlog.addBatch(EventSerdes.decodeCleanupBatch(v), true));
    }
    List<Parent> out = new ArrayList<>();
    backlog.counts.forEach(
        (key, c) -> {
          int slash = key.indexOf('/');
          out.add(new Parent(key.substring(0, slash), key.substring(slash + 1), c[0], c[1], c[2]));
        });
    return out;
  }

  private void addDeleted(DeletedRecord d) {
    add(d.database(), d.table(), 1, d.commitTimeMicros(), false);
  }

  private void addBatch(CleanupBatch b, boolean delayed) {
    add(b.database(), b.table(), b.ids().size(), b.oldestCommitTimeMicros(), delayed);
  }

  private void add(String database, TableName table, long n, long commitMicros, boolean delayed) {
    long[] c = counts.computeIfAbsent(database + "/" + table, k -> new long[] {0, 0, 0});
    c[0] += n;
    c[1] = c[1] == 0 ? commitMicros : Math.min(c[1], commitMicros);
    if (delayed) {
      c[2] += n;
    }
  }

  /** Reads ranges of topics without joining any group. */
  private record Reader(Admin admin, KafkaConsumer<byte[], byte[]> consumer) {
    /** Records after the group's committed positions (all of them when it committed none). */
    void readUncommitted(String topic, String group, BiConsumer<byte[], byte[]> each)
        throws InterruptedException {
      Map<TopicPartition, OffsetAndMetadata> committed;
      try {
        committed = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
      } catch (ExecutionException e) {
        committed = Map.of();
      }
      read(topic, committed, each);
    }

    void readAll(String topic, BiConsumer<byte[], byte[]> each) throws InterruptedException {
      read(topic, Map.of(), each);
    }

    private void read(
        String topic, Map<TopicPartition, OffsetAndMetadata> from, BiConsumer<byte[], byte[]> each)
        throws InterruptedException {
      List<TopicPartition> partitions = partitions(topic);
      if (partitions.isEmpty()) {
        return;
      }
      consumer.assign(partitions);
      Map<TopicPartition, Long> start = consumer.beginningOffsets(partitions);
      Map<TopicPartition, Long> end = consumer.endOffsets(partitions);
      Map<TopicPartition, Long> remaining = new HashMap<>();
      for (TopicPartition tp : partitions) {
        OffsetAndMetadata c = from.get(tp);
        long position = Math.max(start.get(tp), c == null ? 0 : c.offset());
        if (position < end.get(tp)) {
          consumer.seek(tp, position);
          remaining.put(tp, end.get(tp));
        }
      }
      consumer.assign(new ArrayList<>(remaining.keySet()));
      while (!remaining.isEmpty()) {
        for (ConsumerRecord<byte[], byte[]> r : consumer.poll(POLL)) {
          TopicPartition tp = new TopicPartition(r.topic(), r.partition());
          Long stop = remaining.get(tp);
          if (stop == null || r.offset() >= stop) {
            continue;
          }
          try {
            each.accept(r.key(), r.value());
          } catch (RuntimeException e) {
            // A malformed record is the dead-letter topic's business, not the backlog's.
          }
        }
        // Compacted or control records leave gaps: the position, not the last record, tells.
        remaining.keySet().removeIf(tp -> consumer.position(tp) >= remaining.get(tp));
        if (Thread.interrupted()) {
          throw new InterruptedException();
        }
      }
      consumer.assign(List.of());
    }

    private List<TopicPartition> partitions(String topic) throws InterruptedException {
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
}
