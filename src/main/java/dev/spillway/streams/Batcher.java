package dev.spillway.streams;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.BiFunction;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.processor.PunctuationType;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.StoreBuilder;
import org.apache.kafka.streams.state.Stores;

/**
 * Groups the values of each key into batches of at most {@code maxSize}, each emitted no later than
 * {@code maxWait} after its first value arrived (checked on wall-clock time). Pending values live
 * in a changelogged store, one entry per value, so a crash loses nothing and appending stays cheap.
 * Pure: no I/O besides its store. Output: key → the pipeline's batch built from the raw values.
 */
public final class Batcher implements Processor<String, byte[], String, byte[]> {
  /** Turns one key's pending values, in arrival order, into the key and value emitted. */
  @FunctionalInterface
  public interface BatchBuilder {
    KeyValue<String, byte[]> build(String key, List<byte[]> values);

    /** A builder that emits under the values' own key. */
    static BatchBuilder keepingKey(BiFunction<String, List<byte[]>, byte[]> value) {
      return (key, values) -> KeyValue.pair(key, value.apply(key, values));
    }
  }

  private static final char ENTRY = '\u0000';
  private static final char META = '\u0001';

  /** Digits of an entry's sequence number: enough for any non-negative long. */
  private static final int SEQ_WIDTH = 19;

  private final String storeName;
  private final int maxSize;
  private final Duration maxWait;
  private final BatchBuilder toBatch;
  private ProcessorContext<String, byte[]> context;
  private KeyValueStore<String, byte[]> store;

  /**
   * @param toBatch turns a key and its pending values (in arrival order) into the emitted record
   */
  public Batcher(String storeName, int maxSize, Duration maxWait, BatchBuilder toBatch) {
    this.storeName = storeName;
    this.maxSize = maxSize;
    this.maxWait = maxWait;
    this.toBatch = toBatch;
  }

  /**
   * The store a Batcher with this name needs: in memory, backed by a changelog topic, behind a
   * cache that is flushed to both before each commit. An entry appended and emitted between two
   * commits reaches the changelog as a tombstone only, and the per-key counter once per commit.
   */
  public static StoreBuilder<KeyValueStore<String, byte[]>> store(String name) {
    return Stores.keyValueStoreBuilder(
            Stores.inMemoryKeyValueStore(name), Serdes.String(), Serdes.ByteArray())
        .withCachingEnabled();
  }

  @Override
  public void init(ProcessorContext<String, byte[]> context) {
    this.context = context;
    this.store = context.getStateStore(storeName);
    Duration tick =
        maxWait.dividedBy(4).compareTo(Duration.ofMillis(20)) < 0
            ? Duration.ofMillis(20)
            : maxWait.dividedBy(4);
    context.schedule(tick, PunctuationType.WALL_CLOCK_TIME, this::emitExpired);
  }

  @Override
  public void process(Record<String, byte[]> record) {
    String key = record.key();
    if (key == null || record.value() == null) {
      return;
    }
    Meta meta = Meta.decode(store.get(key + META));
    long now = context.currentSystemTimeMs();
    if (meta.count == 0) {
      meta = new Meta(0, now, meta.nextSeq);
    }
    store.put(entryKey(key, meta.nextSeq), record.value());
    meta = new Meta(meta.count + 1, meta.firstSeenMs, meta.nextSeq + 1);
    store.put(key + META, meta.encode());
    if (meta.count >= maxSize) {
      emit(key, meta);
    }
  }

  private void emitExpired(long now) {
    List<KeyValue<String, Meta>> due = new ArrayList<>();
    try (KeyValueIterator<String, byte[]> it = store.all()) {
      while (it.hasNext()) {
        KeyValue<String, byte[]> kv = it.next();
        if (kv.key.charAt(kv.key.length() - 1) == META) {
          Meta m = Meta.decode(kv.value);
          if (m.count > 0 && now - m.firstSeenMs >= maxWait.toMillis()) {
            due.add(KeyValue.pair(kv.key.substring(0, kv.key.length() - 1), m));
          }
        }
      }
    }
    due.forEach(kv -> emit(kv.key, kv.value));
  }

  private void emit(String key, Meta meta) {
    List<byte[]> values = new ArrayList<>(meta.count);
    List<String> keys = new ArrayList<>(meta.count);
    try (KeyValueIterator<String, byte[]> it =
        store.range(entryKey(key, 0), entryKey(key, Long.MAX_VALUE))) {
      while (it.hasNext()) {
        KeyValue<String, byte[]> kv = it.next();
        keys.add(kv.key);
        values.add(kv.value);
      }
    }
    for (int from = 0; from < values.size(); from += maxSize) {
      List<byte[]> part = values.subList(from, Math.min(values.size(), from + maxSize));
      KeyValue<String, byte[]> batch = toBatch.build(key, part);
      context.forward(new Record<>(batch.key, batch.value, context.currentSystemTimeMs()));
    }
    keys.forEach(store::delete);
    store.put(key + META, new Meta(0, 0, meta.nextSeq).encode());
  }

  private static String entryKey(String key, long seq) {
    // Fixed-width sequence numbers keep a key's entries in arrival order within a range scan.
    String digits = Long.toString(seq);
    StringBuilder b = new StringBuilder(key.length() + 1 + SEQ_WIDTH).append(key).append(ENTRY);
    for (int i = digits.length(); i < SEQ_WIDTH; i++) {
      b.append('0');
    }
    return b.append(digits).toString();
  }

  private record Meta(int count, long firstSeenMs, long nextSeq) {
    static Meta decode(byte[] bytes) {
      if (bytes == null) {
        return new Meta(0, 0, 0);
      }
      ByteBuffer b = ByteBuffer.wrap(bytes);
      return new Meta(b.getInt(), b.getLong(), b.getLong());
    }

    byte[] encode() {
      return ByteBuffer.allocate(20).putInt(count).putLong(firstSeenMs).putLong(nextSeq).array();
    }
  }
}
