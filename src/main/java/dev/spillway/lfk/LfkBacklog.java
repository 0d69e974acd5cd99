package dev.spillway.lfk;

import dev.spillway.event.CleanupBatch;
import dev.spillway.event.DeletedRecord;
import dev.spillway.event.EventSerdes;
import dev.spillway.event.Pipeline;
import dev.spillway.event.TableName;
import dev.spillway.event.TopicRange;
import dev.spillway.event.Topics;
import dev.spillway.ops.DeadLetterReplay;
import dev.spillway.sink.ReleasedPastCommit;
import dev.spillway.sink.SinkHeaders;
import dev.spillway.streams.Batcher;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.BiConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;

/**
 * The loose-foreign-key backlog per parent table, read from Kafka: deleted records the batcher has
 * not taken yet, those waiting in its store for their batch, cleanup batches not yet settled, and
 * batches delayed after repeated attempts; apart from them, dead-lettered batches no replay has
 * handed back. Counted from the committed positions of the pipeline's consumer groups, so it is
 * exact when nothing moves and may briefly count a record twice while it passes from one stage to
 * the next.
 */
public final class LfkBacklog {

  /**
   * @param pending deleted parent rows whose children are not cleaned up yet
   * @param oldestCommitMicros commit time of the oldest pending delete, 0 when none is pending
   * @param rescheduled pending rows delayed after repeated unfinished runs
   * @param deadLettered deleted parent rows, not pending, in dead-lettered batches no replay has
   *     handed back and {@code replay lfk} would: their children are cleaned only once one does
   */
  public record Parent(
      String database,
      String table,
      long pending,
      long oldestCommitMicros,
      long rescheduled,
      long deadLettered) {}

  private final Map<String, long[]> counts = new TreeMap<>();

  private LfkBacklog() {}

  /**
   * Reads the backlog; empty when nothing was ever captured.
   *
   * @param definitions the configuration's: dead letters of a parent none of them has are not
   *     counted, since {@code replay lfk} leaves them
   */
  public static List<Parent> read(
      String bootstrapServers,
      Map<String, String> kafkaProperties,
      Topics topics,
      List<LooseForeignKey> definitions)
      throws InterruptedException {
    LfkBacklog backlog = new LfkBacklog();
    String app = topics.streamsApplication(Pipeline.LFK, LfkPipeline.STREAMS_NAME);
    try (TopicRange range = TopicRange.open(bootstrapServers, kafkaProperties)) {
      range.read(
          topics.deletedRecords(),
          range.afterCommitted(app),
          decoded((k, v) -> backlog.addDeleted(EventSerdes.decodeDeletedRecord(v))));
      Map<String, byte[]> store = new HashMap<>();
      range.read(
          topics.changelog(Pipeline.LFK, LfkPipeline.STREAMS_NAME, LfkTopology.PENDING_STORE),
          TopicRange.all(),
          decoded(
              (k, v) -> {
                if (v == null) {
                  store.remove(new String(k, java.nio.charset.StandardCharsets.UTF_8));
                } else {
                  store.put(new String(k, java.nio.charset.StandardCharsets.UTF_8), v);
                }
              }));
      store.forEach(
          (k, v) -> {
            if (Batcher.isEntry(k)) {
              backlog.addDeleted(EventSerdes.decodeDeletedRecord(v));
            }
          });
      range.read(
          topics.cleanupBatches(),
          range.afterCommitted(topics.sinkGroup(Pipeline.LFK)),
          decoded((k, v) -> backlog.addBatch(EventSerdes.decodeCleanupBatch(v), false)));
      // Past its commit the delay topic holds batches released already: counted where they went.
      Map<TopicPartition, OffsetAndMetadata> delays =
          range.committed(topics.delayGroup(Pipeline.LFK));
      Map<TopicPartition, Long> from = new HashMap<>();
      Map<TopicPartition, Set<Long>> released = new HashMap<>();
      delays.forEach(
          (tp, c) -> {
            from.put(tp, c.offset());
            released.put(tp, ReleasedPastCommit.offsets(c));
          });
      // Rescheduled: delayed out of attempts. One waiting out a lock timeout (it names its lock
      // waits), or stepped aside from a table at STOP, is only pending.
      TopicRange.Each rescheduled =
          decoded((k, v) -> backlog.addBatch(EventSerdes.decodeCleanupBatch(v), true));
      TopicRange.Each waiting =
          decoded((k, v) -> backlog.addBatch(EventSerdes.decodeCleanupBatch(v), false));
      range.read(
          topics.delayed(Pipeline.LFK),
          partitions -> from,
          r -> {
            TopicPartition tp = new TopicPartition(r.topic(), r.partition());
            if (!released.getOrDefault(tp, Set.of()).contains(r.offset())) {
              boolean outOfAttempts =
                  r.headers().lastHeader(SinkHeaders.LOCK_WAITS) == null
                      && r.headers().lastHeader(SinkHeaders.STEPPED_ASIDE) == null;
              (outOfAttempts ? rescheduled : waiting).accept(r);
            }
          });
    }
    // As replay lfk reads them, by database and table.
    DeadLetterReplay.Batches replayable = LfkPipeline.deadLetterBatches(topics, definitions);
    for (DeadLetterReplay.Letter l :
        DeadLetterReplay.list(
            bootstrapServers,
            kafkaProperties,
            topics.dlq(Pipeline.LFK),
            topics.replays(Pipeline.LFK),
            new DeadLetterReplay.Batches(
                replayable.isBatchesTopic(),
                value -> {
                  CleanupBatch b = EventSerdes.decodeCleanupBatch(value);
                  return new DeadLetterReplay.Batch(key(b.database(), b.table()), b.ids().size());
                },
                entity ->
                    replayable.unconfigured().apply(entity.substring(entity.indexOf('/') + 1))))) {
      if (l.fate() == DeadLetterReplay.Fate.WOULD_REPLAY) {
        backlog.counts.computeIfAbsent(l.entity(), k -> new long[4])[3] += l.size();
      }
    }
    List<Parent> out = new ArrayList<>();
    backlog.counts.forEach(
        (key, c) -> {
          int slash = key.indexOf('/');
          out.add(
              new Parent(
                  key.substring(0, slash), key.substring(slash + 1), c[0], c[1], c[2], c[3]));
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
    long[] c = counts.computeIfAbsent(key(database, table), k -> new long[4]);
    c[0] += n;
    c[1] = c[1] == 0 ? commitMicros : Math.min(c[1], commitMicros);
    if (delayed) {
      c[2] += n;
    }
  }

  private static String key(String database, TableName table) {
    return database + "/" + table;
  }

  /** Each record's key and value; a malformed record is the dead-letter topic's business. */
  private static TopicRange.Each decoded(BiConsumer<byte[], byte[]> each) {
    return r -> {
      try {
        each.accept(r.key(), r.value());
      } catch (RuntimeException e) {
        // Not counted: the pipeline dead-letters it.
      }
    };
  }
}
