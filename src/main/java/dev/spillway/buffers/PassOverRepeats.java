package dev.spillway.buffers;

import dev.spillway.event.EventSerdes;
import dev.spillway.event.InsertIdentity;
import dev.spillway.streams.Changelogs;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.StoreBuilder;

/**
 * Passes over an insert capture published a second time, so that it forms no second batch under
 * another group id. When the instance capturing a database dies, the one taking capture over goes
 * on from the last position capture stored and publishes again what came after it, each insert with
 * the {@link InsertIdentity} it had the first time.
 *
 * <p>It remembers the identities of the last {@link #WINDOW} inserts that went through, as long as
 * they were committed within {@link #WINDOW_AGE} of the latest commit seen, and passes over an
 * insert whose identity it remembers: nothing else, so whatever order events come in, an insert is
 * passed over only when the very same change went through before. Nothing new is published while
 * capture is down, so the inserts published again follow their first copies closely: a window of
 * this many covers what capture publishes again at some tens of thousands of inserts a second. Rows
 * a snapshot read have no identity and always go through.
 *
 * <p>Identities are kept in chunks of {@link #CHUNK} in a changelogged store, the open chunk
 * written again at each insert (the store's cache sends the changelog its last state at each
 * commit, in the transaction of the batches it let through), and read back when the task starts,
 * here or elsewhere.
 */
final class PassOverRepeats implements Processor<String, byte[], String, byte[]> {
  /** How many inserts that went through are remembered, at least (a chunk more at most). */
  static final int WINDOW = 100_000;

  /** How much older a commit can be than the latest seen and its insert still be remembered. */
  static final Duration WINDOW_AGE = Duration.ofMinutes(10);

  /** Identities per store entry: 768 bytes. */
  static final int CHUNK = 32;

  private final String storeName;
  private final int window;
  private final long windowAgeMicros;
  private final Runnable passedOver;

  private final IdentityWindow seen;

  /** Oldest first; the last is the open one when it has fewer than {@link #CHUNK} identities. */
  private final ArrayDeque<Chunk> chunks = new ArrayDeque<>();

  private ProcessorContext<String, byte[]> context;
  private KeyValueStore<Long, byte[]> store;
  private long latestCommitMicros = Long.MIN_VALUE;

  /**
   * @param passedOver told of each insert passed over
   */
  PassOverRepeats(String storeName, Runnable passedOver) {
    this(storeName, WINDOW, WINDOW_AGE, passedOver);
  }

  PassOverRepeats(String storeName, int window, Duration windowAge, Runnable passedOver) {
    this.storeName = storeName;
    this.window = window;
    this.windowAgeMicros = TimeUnit.MICROSECONDS.convert(windowAge);
    this.passedOver = passedOver;
    this.seen = new IdentityWindow(window + CHUNK); // what forget() leaves, and one more
  }

  /**
   * The store it needs: in memory, backed by a changelog topic compacted soon ({@link
   * Changelogs#shortLivedStore}: each chunk is written again until it is full), behind a cache.
   */
  static StoreBuilder<KeyValueStore<Long, byte[]>> store(String name) {
    return Changelogs.shortLivedStore(name, Serdes.Long());
  }

  @Override
  public void init(ProcessorContext<String, byte[]> context) {
    this.context = context;
    this.store = context.getStateStore(storeName);
    // Streams initializes the same instance again when a task comes back: the store tells.
    seen.removeOldest(seen.size());
    chunks.clear();
    latestCommitMicros = Long.MIN_VALUE;
    List<KeyValue<Long, byte[]>> stored = new ArrayList<>();
    try (KeyValueIterator<Long, byte[]> it = store.all()) { // in key order: oldest first
      it.forEachRemaining(stored::add);
    }
    for (KeyValue<Long, byte[]> kv : stored) {
      Chunk c = new Chunk(kv.key, seen.next());
      chunks.add(c);
      ByteBuffer in = ByteBuffer.wrap(kv.value);
      while (in.remaining() >= InsertIdentity.BYTES && c.size < CHUNK) {
        InsertIdentity id = InsertIdentity.readFrom(in);
        if (!seen.contains(id)) {
          remember(c, id);
        }
      }
    }
  }

  @Override
  public void process(Record<String, byte[]> record) {
    Optional<InsertIdentity> identity = EventSerdes.identityOf(record.value());
    if (identity.isEmpty()) {
      context.forward(record);
      return;
    }
    InsertIdentity id = identity.get();
    if (seen.contains(id)) {
      passedOver.run();
      return;
    }
    Chunk open = chunks.peekLast();
    if (open == null || open.size == CHUNK) {
      open = new Chunk(open == null ? 0 : open.key + 1, seen.next());
      chunks.add(open);
    }
    remember(open, id);
    store.put(open.key, seen.bytes(open.first, open.size));
    context.forward(record);
  }

  private void remember(Chunk chunk, InsertIdentity id) {
    seen.add(id);
    chunk.size++;
    chunk.latestCommitMicros = Math.max(chunk.latestCommitMicros, id.commitMicros());
    latestCommitMicros = Math.max(latestCommitMicros, id.commitMicros());
    forget();
  }

  /** Drops the oldest chunks but the open one, past the window's length or age. */
  private void forget() {
    while (chunks.size() > 1) {
      Chunk oldest = chunks.peekFirst();
      boolean tooMany = seen.size() - oldest.size >= window;
      boolean tooOld = oldest.latestCommitMicros < latestCommitMicros - windowAgeMicros;
      if (!tooMany && !tooOld) {
        return;
      }
      chunks.removeFirst();
      seen.removeOldest(oldest.size);
      store.delete(oldest.key);
    }
  }

  /**
   * Up to {@link #CHUNK} identities under one store key: those the window numbers from {@code
   * first} on.
   */
  private static final class Chunk {
    final long key;
    final long first;
    int size;
    long latestCommitMicros = Long.MIN_VALUE;

    Chunk(long key, long first) {
      this.key = key;
      this.first = first;
    }
  }
}
