package dev.spillway.ops;

import dev.spillway.event.TopicRange;
import dev.spillway.event.Topics;
import dev.spillway.sink.ReleasedPastCommit;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TimeoutException;

/**
 * How far Spillway's consumer groups are behind, per group and topic: records after each group's
 * committed positions on every partition of the topics it committed on or is assigned (from a
 * partition's first record where it committed none) and when the oldest of them was written. Read
 * from Kafka alone, so it also tells how far a stopped Spillway has to catch up. A topic capture
 * writes that no group reads yet (its pipeline left out with {@code --only}, or never run) is
 * behind from its first record, under the group {@link #NO_GROUP}: what it holds is lost to
 * retention as surely as a stopped group's backlog.
 */
public final class ConsumerLag {
  /** The group of a captured topic no consumer group of Spillway's reads yet. */
  public static final String NO_GROUP = "-";

  private static final Duration POLL = Duration.ofMillis(200);
  private static final Duration OLDEST_WAIT = Duration.ofSeconds(5);

  /**
   * One group on one topic.
   *
   * @param lag records the group has not committed yet
   * @param oldestWaitingMillis when the first of them was written (epoch ms); null when none waits
   *     or it could not be read
   * @param members consumers in the group now
   */
  public record Lag(
      String group, String topic, int partitions, long lag, Long oldestWaitingMillis, int members) {

    /**
     * How long the oldest waiting record has waited at {@code nowMillis}, never negative (clocks
     * may disagree); null when none waits or it could not be read.
     */
    public Long waitedMillis(long nowMillis) {
      return oldestWaitingMillis == null ? null : Math.max(0, nowMillis - oldestWaitingMillis);
    }
  }

  private ConsumerLag() {}

  /** The lag of every consumer group named {@code <prefix>.<pipeline>.…}. */
  public static List<Lag> read(
      String bootstrapServers, Map<String, String> kafkaProperties, String prefix)
      throws InterruptedException, ExecutionException {
    try (TopicRange range = TopicRange.open(bootstrapServers, kafkaProperties)) {
      return read(range, prefix);
    }
  }

  /** The lag of every consumer group named {@code <prefix>.<pipeline>.…}, read through range. */
  public static List<Lag> read(TopicRange range, String prefix)
      throws InterruptedException, ExecutionException {
    Admin admin = range.admin();
    Topics names = new Topics(prefix);
    Set<String> groups = new TreeSet<>();
    for (ConsumerGroupListing g : admin.listConsumerGroups().all().get()) {
      if (names.owns(g.groupId())) {
        groups.add(g.groupId());
      }
    }
    Map<String, ConsumerGroupDescription> described =
        groups.isEmpty() ? Map.of() : admin.describeConsumerGroups(groups).all().get();
    List<Lag> out = new ArrayList<>();
    Set<String> read = new HashSet<>();
    for (String group : groups) {
      Map<TopicPartition, OffsetAndMetadata> committed =
          admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
      ConsumerGroupDescription d = described.get(group);
      // Every partition of each topic the group committed on or is assigned: a partition it
      // never committed on is behind from its first record.
      Set<String> topics = new TreeSet<>();
      committed.forEach(
          (tp, o) -> {
            if (o != null) {
              topics.add(tp.topic());
            }
          });
      if (d != null) {
        for (MemberDescription m : d.members()) {
          m.assignment().topicPartitions().forEach(tp -> topics.add(tp.topic()));
        }
      }
      read.addAll(topics);
      Set<TopicPartition> partitions = new TreeSet<>(BY_TOPIC_PARTITION);
      for (String topic : topics) {
        // Through the admin client: a topic deleted since the group committed on it is skipped,
        // not created again by a broker that creates topics on demand.
        partitions.addAll(range.partitions(topic));
      }
      out.addAll(lags(range, group, partitions, committed, d == null ? 0 : d.members().size()));
    }
    Set<TopicPartition> unread = new TreeSet<>(BY_TOPIC_PARTITION);
    for (String topic : new TreeSet<>(admin.listTopics().names().get())) {
      // Captured, or batches a sink (delayed batches a releaser) never committed on: a stopped
      // Spillway has them to catch up on too.
      if ((names.isCaptured(topic) || names.isClaimed(topic)) && !read.contains(topic)) {
        unread.addAll(range.partitions(topic));
      }
    }
    out.addAll(lags(range, NO_GROUP, unread, Map.of(), 0));
    return out;
  }

  private static final Comparator<TopicPartition> BY_TOPIC_PARTITION =
      Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition);

  private static List<Lag> lags(
      TopicRange range,
      String group,
      Collection<TopicPartition> partitions,
      Map<TopicPartition, OffsetAndMetadata> committed,
      int members)
      throws InterruptedException, ExecutionException {
    if (partitions.isEmpty()) {
      return List.of();
    }
    Map<TopicPartition, Long> first = range.offsets(partitions, OffsetSpec.earliest());
    Map<TopicPartition, Long> end = range.offsets(partitions, OffsetSpec.latest());
    Map<String, List<TopicPartition>> byTopic = new TreeMap<>();
    partitions.forEach(tp -> byTopic.computeIfAbsent(tp.topic(), t -> new ArrayList<>()).add(tp));
    List<Lag> out = new ArrayList<>();
    for (Map.Entry<String, List<TopicPartition>> t : byTopic.entrySet()) {
      long lag = 0;
      Map<TopicPartition, Long> waitingFrom = new HashMap<>();
      Map<TopicPartition, Long> behindOf = new HashMap<>();
      for (TopicPartition tp : t.getValue()) {
        OffsetAndMetadata c = committed.get(tp);
        long from = Math.max(first.get(tp), c == null ? 0 : c.offset());
        long to = end.get(tp);
        // A delay group's commit names the batches past it it released already: not behind.
        long released =
            from < to ? ReleasedPastCommit.offsets(c).subSet(from, true, to, false).size() : 0;
        long behind = Math.max(0, to - from - released);
        lag += behind;
        if (behind > 0) {
          waitingFrom.put(tp, from);
          behindOf.put(tp, behind);
        }
      }
      Oldest oldest = oldest(range.consumer(), waitingFrom, end);
      // Read to its end without a record: what it counted were transaction markers (or records
      // retention deleted meanwhile), which no one waits for.
      for (TopicPartition tp : oldest.empty()) {
        lag -= behindOf.get(tp);
      }
      out.add(new Lag(group, t.getKey(), t.getValue().size(), lag, oldest.millis(), members));
    }
    return out;
  }

  /**
   * What {@link #oldest} read.
   *
   * @param millis the earliest write time of the records found; null when none was, or when a
   *     partition could not be read in time
   * @param empty the partitions read to their end without a record
   */
  record Oldest(Long millis, Set<TopicPartition> empty) {}

  /**
   * The earliest write time of the first records at or after these positions, below each
   * partition's {@code end}, and the partitions with none: null when that of one partition could
   * not be read in time. A record deleted since the positions were looked up (by retention) is
   * passed over to the first one still there, and a partition with nothing left before its end (but
   * transaction markers) is not waited for.
   */
  static Oldest oldest(
      KafkaConsumer<byte[], byte[]> consumer,
      Map<TopicPartition, Long> at,
      Map<TopicPartition, Long> end)
      throws InterruptedException {
    if (at.isEmpty()) {
      return new Oldest(null, Set.of());
    }
    Map<TopicPartition, Long> found = new HashMap<>();
    Set<TopicPartition> gone = new HashSet<>();
    try {
      consumer.assign(at.keySet());
      at.forEach(consumer::seek);
      long until = System.nanoTime() + OLDEST_WAIT.toNanos();
      while (found.size() + gone.size() < at.size() && System.nanoTime() < until) {
        for (ConsumerRecord<byte[], byte[]> r : consumer.poll(POLL)) {
          TopicPartition tp = new TopicPartition(r.topic(), r.partition());
          if (!found.containsKey(tp) && r.offset() < end.get(tp)) {
            found.put(tp, r.timestamp());
            consumer.pause(List.of(tp));
          }
        }
        for (TopicPartition tp : at.keySet()) {
          if (!found.containsKey(tp) && reachedEnd(consumer, tp, end.get(tp)) && gone.add(tp)) {
            consumer.pause(List.of(tp));
          }
        }
        if (Thread.interrupted()) {
          throw new InterruptedException();
        }
      }
    } finally {
      // The consumer serves later reads: nothing paused or assigned may outlive this one.
      consumer.resume(consumer.paused());
      consumer.assign(List.of());
    }
    if (found.size() + gone.size() < at.size()) {
      // A partition not read in time may hold an older record than any found.
      return new Oldest(null, Set.copyOf(gone));
    }
    return new Oldest(found.values().stream().min(Long::compare).orElse(null), Set.copyOf(gone));
  }

  /**
   * Whether the read of {@code tp} is at {@code end}; not yet when its position is still sought.
   */
  private static boolean reachedEnd(
      KafkaConsumer<byte[], byte[]> consumer, TopicPartition tp, long end) {
    try {
      return consumer.position(tp, POLL) >= end;
    } catch (TimeoutException e) {
      return false; // within the read's own wait, not the client's minute
    }
  }
}
