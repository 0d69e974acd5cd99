package dev.spillway.streams;

import dev.spillway.event.KafkaClients;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.BiFunction;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.processor.Cancellable;
import org.apache.kafka.streams.processor.PunctuationType;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.StoreBuilder;

/**
 * Groups the values of each key into batches of at most {@code maxSize} values and {@link
 * #MAX_BATCH_BYTES} bytes of them, each emitted no later than {@code maxWait} after its first value
 * arrived (checked on wall-clock time). Pending values are held in memory and written, one entry
 * per value, to a changelogged store that is only read when the processor starts: what a crash left
 * pending comes back from it and is emitted at the first tick. Pure: no I/O besides its store.
 * Output: key → the pipeline's batch built from the raw values.
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

  /** Separates a key from its entry's sequence number in a store key. */
  private static final char ENTRY = '\u0000';

  /** Digits of an entry's sequence number: enough for any non-negative long. */
  private static final int SEQ_WIDTH = 19;

  /**
   * The most bytes of values one batch carries, so that it fits one Kafka record. More would fail
   * the send, stop the application, and fail again from the store after every restart. A value
   * larger than this alone goes in a batch of its own (capture publishes none that large).
   */
  public static final int MAX_BATCH_BYTES = KafkaClients.MAX_VALUE_BYTES;

  private static final Duration MIN_TICK = Duration.ofMillis(20);
  private static final Duration MAX_TICK = Duration.ofSeconds(1);
  private static final Duration MAX_POLL = Duration.ofMillis(100);

  private final String storeName;
  private final int maxSize;
  private final long maxBytes;
  private final Duration maxWait;
  private final Duration tick;

  /** How much before {@code maxWait} a key is due: a tick, and a check run late by a poll. */
  private final long dueMarginMs;

  private final BatchBuilder toBatch;

  /** Per key, in the order keys got their first pending value. */
  private final Map<String, Pending> pending = new LinkedHashMap<>();

  private ProcessorContext<String, byte[]> context;
  private KeyValueStore<String, byte[]> store;
  private Cancellable check;
  private long nextSeq;

  /**
   * @param toBatch turns a key and its pending values (in arrival order) into the emitted record
   */
  public Batcher(String storeName, int maxSize, Duration maxWait, BatchBuilder toBatch) {
    this(storeName, maxSize, MAX_BATCH_BYTES, maxWait, toBatch);
  }

  /**
   * A batcher whose batches carry at most {@code maxBytes} bytes of values (one value alone more).
   */
  public Batcher(
      String storeName, int maxSize, long maxBytes, Duration maxWait, BatchBuilder toBatch) {
    this.storeName = storeName;
    this.maxSize = maxSize;
    this.maxBytes = maxBytes;
    this.maxWait = maxWait;
    this.tick = tick(maxWait);
    this.dueMarginMs = tick.toMillis() + poll(tick).toMillis();
    this.toBatch = toBatch;
  }

  /**
   * The store a Batcher with this name needs: in memory, backed by a changelog topic, behind a
   * cache that is flushed to both before each commit, so an entry appended and emitted between two
   * commits reaches the changelog as a tombstone only; compacted soon ({@link
   * Changelogs#shortLivedStore}), as nearly all of it is tombstones.
   */
  public static StoreBuilder<KeyValueStore<String, byte[]>> store(String name) {
    return Changelogs.shortLivedStore(name, Serdes.String());
  }

  @Override
  public void init(ProcessorContext<String, byte[]> context) {
    this.context = context;
    this.store = context.getStateStore(storeName);
    // Streams initializes the same instance again when a task comes back (resumed, or revived
    // after a dirty close): only the store tells what is pending then.
    pending.clear();
    nextSeq = 0;
    restore();
    if (check != null) {
      check.cancel(); // the check of its earlier life, which a suspension does not end
    }
    check = context.schedule(tick, PunctuationType.WALL_CLOCK_TIME, this::emitExpired);
  }

  /**
   * How often pending values are checked: a tenth of {@code maxWait}, at least 20 ms, and at most a
   * second, so values a restart brought back wait no longer than that. Kafka Streams runs a check
   * between polls for input, so one can come up to a {@link #poll} late. A key whose first value
   * could have waited longer than {@code maxWait} at the next check, come late, goes at this one,
   * so a batch waits between {@code maxWait} less a tick and a poll and {@code maxWait} (with a
   * {@code maxWait} under 30 ms, up to 30 ms: the first check and a poll).
   */
  public static Duration tick(Duration maxWait) {
    Duration tenth = maxWait.dividedBy(10);
    return tenth.compareTo(MIN_TICK) < 0
        ? MIN_TICK
        : tenth.compareTo(MAX_TICK) > 0 ? MAX_TICK : tenth;
  }

  /**
   * The longest the Streams thread running a batcher checked every {@code tick} may wait for input
   * ({@code poll.ms}): half a tick, at most 100 ms.
   */
  public static Duration poll(Duration tick) {
    Duration half = tick.dividedBy(2);
    return half.compareTo(MAX_POLL) > 0 ? MAX_POLL : half;
  }

  /**
   * Takes up what the store holds (restored from its changelog before this runs) as pending since
   * time 0, so it goes out at the first tick. Entries of another layout, which earlier versions
   * wrote (a counter per key), are dropped: their values are in entries of this layout.
   */
  private void restore() {
    List<String> foreign = new ArrayList<>();
    try (KeyValueIterator<String, byte[]> it = store.all()) {
      while (it.hasNext()) {
        KeyValue<String, byte[]> kv = it.next();
        if (!isEntry(kv.key)) {
          foreign.add(kv.key);
          continue;
        }
        int at = kv.key.length() - SEQ_WIDTH - 1;
        nextSeq = Math.max(nextSeq, Long.parseLong(kv.key.substring(at + 1)) + 1);
        pending.computeIfAbsent(kv.key.substring(0, at), k -> new Pending(0)).add(kv.key, kv.value);
      }
    }
    foreign.forEach(store::delete);
  }

  /** Whether a key of a batcher's store is one pending value's entry (its value the raw value). */
  public static boolean isEntry(String storeKey) {
    int at = storeKey.length() - SEQ_WIDTH - 1;
    return at >= 0 && storeKey.charAt(at) == ENTRY;
  }

  @Override
  public void process(Record<String, byte[]> record) {
    String key = record.key();
    if (key == null || record.value() == null) {
      return;
    }
    long now = context.currentSystemTimeMs();
    Pending waiting = pending.get(key);
    if (waiting != null && waiting.bytes + record.value().length > maxBytes) {
      emit(key, waiting); // full by bytes: this value starts the next batch
    }
    Pending p = pending.computeIfAbsent(key, k -> new Pending(now));
    String entry = entryKey(key, nextSeq++);
    store.put(entry, record.value());
    p.add(entry, record.value());
    if (p.values.size() >= maxSize || p.bytes >= maxBytes) {
      emit(key, p);
    }
  }

  private void emitExpired(long now) {
    // Keys are in the order of their first pending value, so the due ones come first. Due: it
    // could be late at the next check.
    List<Map.Entry<String, Pending>> due = new ArrayList<>();
    for (Map.Entry<String, Pending> e : pending.entrySet()) {
      if (now - e.getValue().firstSeenMs + dueMarginMs <= maxWait.toMillis()) {
        break;
      }
      due.add(e);
    }
    due.forEach(e -> emit(e.getKey(), e.getValue()));
  }

  /**
   * Emits a key's pending values: one batch, or several within the limits when a restart brought
   * back more than one batch's worth.
   */
  private void emit(String key, Pending p) {
    pending.remove(key);
    int from = 0;
    while (from < p.values.size()) {
      int to = from;
      long bytes = 0;
      do {
        bytes += p.values.get(to++).length;
      } while (to < p.values.size()
          && to - from < maxSize
          && bytes + p.values.get(to).length <= maxBytes);
      KeyValue<String, byte[]> batch = toBatch.build(key, p.values.subList(from, to));
      context.forward(new Record<>(batch.key, batch.value, context.currentSystemTimeMs()));
      from = to;
    }
    p.entries.forEach(store::delete);
  }

  private static String entryKey(String key, long seq) {
    // Fixed-width sequence numbers keep a key's entries in arrival order in the store.
    String digits = Long.toString(seq);
    StringBuilder b = new StringBuilder(key.length() + 1 + SEQ_WIDTH).append(key).append(ENTRY);
    for (int i = digits.length(); i < SEQ_WIDTH; i++) {
      b.append('0');
    }
    return b.append(digits).toString();
  }

  /** One key's pending values in arrival order, and their entries in the store. */
  private static final class Pending {
    final long firstSeenMs;
    final List<String> entries = new ArrayList<>();
    final List<byte[]> values = new ArrayList<>();
    long bytes;

    Pending(long firstSeenMs) {
      this.firstSeenMs = firstSeenMs;
    }

    void add(String entry, byte[] value) {
      entries.add(entry);
      values.add(value);
      bytes += value.length;
    }
  }
}
