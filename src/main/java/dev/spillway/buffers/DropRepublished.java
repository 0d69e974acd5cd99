package dev.spillway.buffers;

import dev.spillway.event.BufferEvent;
import dev.spillway.event.EventSerdes;
import dev.spillway.event.StreamPosition;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * Passes over the inserts capture published a second time, so that they form no second batch under
 * another group id. When the instance capturing a database dies, the one taking capture over goes
 * on from the last position capture stored, and publishes again what came after it: those changes
 * carry the {@link StreamPosition} they had the first time, below the highest this buffer has seen.
 *
 * <p>Per key (a buffer's events are keyed by their table, so they come in the order capture read
 * them) it keeps the highest position seen, the latest commit time seen, and the events at that
 * position. An event is passed over when its position is below the highest and its commit is no
 * later than the latest seen; at the highest position itself (several rows of one {@code COPY}
 * share one) only when one of the events kept there has the same row. An event whose commit is
 * later than any seen is never passed over, so a stream that starts again lower (another server, a
 * new slot) goes through, and starts the positions kept anew. Events without a position (read by a
 * snapshot, or written before positions were) go through untouched.
 *
 * <p>What it keeps is written to a changelogged store at every event (one entry per key, so the
 * store's cache sends the changelog one record per commit), and read back when the task starts
 * elsewhere.
 */
final class DropRepublished implements Processor<String, byte[], String, byte[]> {
  private final String storeName;
  private final Runnable passedOver;
  private final Map<String, Seen> seen = new HashMap<>();
  private ProcessorContext<String, byte[]> context;
  private KeyValueStore<String, byte[]> store;

  /**
   * @param passedOver told of each event passed over
   */
  DropRepublished(String storeName, Runnable passedOver) {
    this.storeName = storeName;
    this.passedOver = passedOver;
  }

  @Override
  public void init(ProcessorContext<String, byte[]> context) {
    this.context = context;
    this.store = context.getStateStore(storeName);
    seen.clear(); // an instance initialized again when its task comes back: the store tells
  }

  @Override
  public void process(Record<String, byte[]> record) {
    Optional<StreamPosition> position = StreamPosition.of(record.headers());
    if (position.isEmpty() || record.key() == null || record.value() == null) {
      context.forward(record);
      return;
    }
    StreamPosition p = position.get();
    Seen s = seen(record.key());
    if (s != null && p.commitMicros() <= s.latestCommitMicros) {
      int c = p.compareTo(s.highest);
      if (c < 0 || (c == 0 && s.hasRow(record.value()))) {
        passedOver.run();
        return;
      }
    }
    Seen next;
    if (s != null && p.compareTo(s.highest) == 0) {
      List<byte[]> at = new ArrayList<>(s.atHighest);
      at.add(record.value());
      next = new Seen(p, Math.max(s.latestCommitMicros, p.commitMicros()), at);
    } else {
      long latest = s == null ? p.commitMicros() : Math.max(s.latestCommitMicros, p.commitMicros());
      next = new Seen(p, latest, List.of(record.value()));
    }
    seen.put(record.key(), next);
    store.put(record.key(), next.bytes());
    context.forward(record);
  }

  private Seen seen(String key) {
    Seen s = seen.get(key);
    if (s == null) {
      byte[] stored = store.get(key);
      if (stored != null) {
        s = Seen.of(stored);
        seen.put(key, s);
      }
    }
    return s;
  }

  /** The highest position seen, the latest commit seen, and the events at that position. */
  private record Seen(StreamPosition highest, long latestCommitMicros, List<byte[]> atHighest) {
    byte[] bytes() {
      byte[] position = highest.bytes();
      int size = position.length + Long.BYTES + Integer.BYTES;
      for (byte[] v : atHighest) {
        size += Integer.BYTES + v.length;
      }
      ByteBuffer b = ByteBuffer.allocate(size);
      b.put(position).putLong(latestCommitMicros).putInt(atHighest.size());
      for (byte[] v : atHighest) {
        b.putInt(v.length).put(v);
      }
      return b.array();
    }

    static Seen of(byte[] bytes) {
      ByteBuffer b = ByteBuffer.wrap(bytes);
      byte[] position = new byte[StreamPosition.BYTES];
      b.get(position);
      long latest = b.getLong();
      int n = b.getInt();
      List<byte[]> at = new ArrayList<>(n);
      for (int i = 0; i < n; i++) {
        byte[] v = new byte[b.getInt()];
        b.get(v);
        at.add(v);
      }
      return new Seen(StreamPosition.of(position), latest, at);
    }

    /** Whether an event kept at the highest position has this event's row. */
    boolean hasRow(byte[] value) {
      Map<String, Object> row = EventSerdes.decodeBufferEvent(value).row();
      for (byte[] kept : atHighest) {
        if (sameRow(EventSerdes.decodeBufferEvent(kept), row)) {
          return true;
        }
      }
      return false;
    }

    private static boolean sameRow(BufferEvent kept, Map<String, Object> row) {
      Map<String, Object> other = kept.row();
      if (other.size() != row.size()) {
        return false;
      }
      for (Map.Entry<String, Object> e : row.entrySet()) {
        Object v = e.getValue();
        Object w = other.get(e.getKey());
        boolean same =
            v instanceof byte[] a && w instanceof byte[] bs
                ? Arrays.equals(a, bs)
                : Objects.equals(v, w) && (v != null || other.containsKey(e.getKey()));
        if (!same) {
          return false;
        }
      }
      return true;
    }
  }
}
