package dev.spillway.lfk;

import dev.spillway.event.CleanupBatch;
import dev.spillway.event.DeletedRecord;
import dev.spillway.event.EventSerdes;
import dev.spillway.event.Pipeline;
import dev.spillway.event.TableName;
import dev.spillway.event.Topics;
import dev.spillway.event.ValueText;
import dev.spillway.streams.Batcher;
import dev.spillway.streams.CheckOrDeadLetter;
import dev.spillway.streams.CheckOrDeadLetter.Verdict;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;

/**
 * Deleted parent rows → cleanup batches: each parent table's deletes are grouped into batches of at
 * most {@code batch-size} ids, each emitted no later than {@code max-wait} after its first delete,
 * on the cleanup-batches topic keyed by parent table and a sequence number, each deleted row known
 * by its key's one column, or the {@code id} of a key of several. A record that is not a deleted
 * row with such a key goes to the pipeline's dead-letter topic with the reason. Pure: no SQL.
 */
public final class LfkTopology {
  public static final String SOURCE = "lfk-deleted-records";
  public static final String CHECK = "lfk-check";
  public static final String BATCH = "lfk-batch";
  public static final String PENDING_STORE = "lfk-pending";
  public static final String SPREAD = "lfk-spread";
  public static final String OUT = "lfk-cleanup-batches";
  public static final String MALFORMED = "lfk-malformed";

  private LfkTopology() {}

  /**
   * @param malformed told of each record the first node sends to the dead-letter topic
   */
  public static Topology build(Topics topics, LfkSettings settings, Runnable malformed) {
    Topology t = new Topology();
    t.addSource(
        SOURCE,
        Serdes.String().deserializer(),
        Serdes.ByteArray().deserializer(),
        topics.deletedRecords());
    t.addProcessor(
        CHECK,
        () -> new CheckOrDeadLetter(LfkTopology::check, BATCH, MALFORMED, malformed),
        SOURCE);
    t.addProcessor(
        BATCH,
        () ->
            new Batcher(
                PENDING_STORE,
                settings.batchSize(),
                // A batch's ids take up to twice the bytes of its deleted records (a bytea key's
                // hex text), and must fit one Kafka record too.
                Batcher.MAX_BATCH_BYTES / 2,
                settings.maxWait(),
                Batcher.BatchBuilder.keepingKey(LfkTopology::toBatch)),
        CHECK);
    t.addStateStore(Batcher.store(PENDING_STORE), BATCH);
    t.addProcessor(SPREAD, Spread::new, BATCH);
    t.addSink(
        OUT,
        topics.cleanupBatches(),
        Serdes.String().serializer(),
        Serdes.ByteArray().serializer(),
        SPREAD);
    t.addSink(
        MALFORMED,
        topics.dlq(Pipeline.LFK),
        Serdes.String().serializer(),
        Serdes.ByteArray().serializer(),
        CHECK);
    return t;
  }

  /** Builds the batch from validated deleted records of one parent table. */
  static byte[] toBatch(String parent, List<byte[]> deletedRecords) {
    List<String> ids = new ArrayList<>(deletedRecords.size());
    List<Long> transactions = new ArrayList<>(deletedRecords.size());
    String database = null;
    long oldest = Long.MAX_VALUE;
    for (byte[] value : deletedRecords) {
      DeletedRecord d = EventSerdes.decodeDeletedRecord(value);
      database = d.database();
      oldest = Math.min(oldest, d.commitTimeMicros());
      ids.add(ValueText.of(d.key().get(referred(d.key()))));
      transactions.add(d.txId());
    }
    return EventSerdes.encode(
        new CleanupBatch(database, TableName.parse(parent), ids, oldest, transactions));
  }

  /**
   * Keys each batch {@code <parent>#<n>} with n counting up, so one parent's batches spread over
   * the partitions and several workers can clean a parent with many deletes at once. Cleanup needs
   * no order between batches: every statement is idempotent.
   */
  private static final class Spread implements Processor<String, byte[], String, byte[]> {
    private ProcessorContext<String, byte[]> context;
    private long next;

    @Override
    public void init(ProcessorContext<String, byte[]> context) {
      this.context = context;
    }

    @Override
    public void process(Record<String, byte[]> record) {
      context.forward(record.withKey(record.key() + "#" + next++));
    }
  }

  /**
   * Passes on deleted rows whose key's referred column is not null, keyed by parent; the rest to
   * DLQ.
   */
  private static Verdict check(Record<String, byte[]> record) {
    if (record.value() == null) {
      return malformed("empty value");
    }
    DeletedRecord d;
    try {
      d = EventSerdes.decodeDeletedRecord(record.value());
    } catch (RuntimeException e) {
      return malformed("not a deleted record: " + e.getMessage());
    }
    Map<String, Object> key = d.key();
    String column = referred(key);
    if (column == null) {
      return malformed(
          "parent "
              + d.table()
              + " has a key of "
              + key.size()
              + " columns "
              + key.keySet()
              + "; loose foreign keys need a one-column primary key, or one holding an id column");
    }
    if (key.get(column) == null) {
      return malformed(
          "parent "
              + d.table()
              + " has a delete without its key "
              + key.keySet()
              + " (its replica identity leaves the primary key out?)");
    }
    return Verdict.pass(d.table().toString());
  }

  /** The key column children refer to, or null when the key has none such. */
  private static String referred(Map<String, Object> key) {
    return LooseForeignKey.referredColumn(key.keySet()).orElse(null);
  }

  private static Verdict malformed(String problem) {
    return Verdict.reject("MalformedDeletedRecord", problem);
  }
}
