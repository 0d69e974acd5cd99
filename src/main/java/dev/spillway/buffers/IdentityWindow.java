package dev.spillway.buffers;

import dev.spillway.event.InsertIdentity;
import java.nio.ByteBuffer;

/**
 * The identities of the inserts a buffer let through last, oldest first, each numbered in the order
 * it came: a ring of three arrays of longs with an open-addressing index of ints into it (linear
 * probing, entries moved back on removal), about 40 bytes an identity where a {@code HashSet} of
 * records takes twice that and an object per identity. It starts small and doubles as it fills, up
 * to its capacity: a buffer's Streams tasks without events (all but one, as a buffer's events lie
 * on one partition) hold next to nothing. Not thread-safe.
 */
final class IdentityWindow {
  /** The most it can hold: its index has up to four times as many entries, an int array's most. */
  static final int MAX_CAPACITY = 1 << 28;

  /** Identities it has room for before it first grows. */
  static final int INITIAL_ROOM = 1 << 10;

  private final int capacity;
  private long[] lsn;
  private long[] commitMicros;
  private long[] hash;

  /** Ring slot + 1 of each identity held, 0 where none; at most half full. */
  private int[] index;

  private int mask;

  /** The number of the oldest identity held, and of the next to come. */
  private long first;

  private long next;

  /**
   * @param capacity the most identities it holds at once
   */
  IdentityWindow(int capacity) {
    if (capacity < 1 || capacity > MAX_CAPACITY) {
      throw new IllegalArgumentException("capacity " + capacity);
    }
    this.capacity = capacity;
    room(Math.min(capacity, INITIAL_ROOM));
  }

  /** Makes room for {@code room} identities, keeping those it holds and their numbers. */
  private void room(int room) {
    long[] oldLsn = lsn;
    long[] oldCommit = commitMicros;
    long[] oldHash = hash;
    int oldRoom = oldLsn == null ? 0 : oldLsn.length;
    lsn = new long[room];
    commitMicros = new long[room];
    hash = new long[room];
    index = new int[Integer.highestOneBit(room) << 2];
    mask = index.length - 1;
    for (long n = first; n < next; n++) {
      int from = (int) (n % oldRoom);
      put(n, oldLsn[from], oldCommit[from], oldHash[from]);
    }
  }

  int size() {
    return (int) (next - first);
  }

  /** The number the next identity {@link #add}ed gets. */
  long next() {
    return next;
  }

  boolean contains(InsertIdentity id) {
    for (int i = home(id.lsn(), id.commitMicros(), id.hash()); index[i] != 0; i = (i + 1) & mask) {
      int slot = index[i] - 1;
      if (lsn[slot] == id.lsn()
          && commitMicros[slot] == id.commitMicros()
          && hash[slot] == id.hash()) {
        return true;
      }
    }
    return false;
  }

  /**
   * Adds an identity it does not hold, as the newest.
   *
   * @throws IllegalStateException when it holds {@code capacity} already
   */
  void add(InsertIdentity id) {
    if (size() == capacity) {
      throw new IllegalStateException("The window holds " + capacity + " identities already");
    }
    if (size() == lsn.length) {
      room((int) Math.min(capacity, 2L * lsn.length));
    }
    put(next++, id.lsn(), id.commitMicros(), id.hash());
  }

  /** Puts the identity numbered {@code n} in its slot and the index. */
  private void put(long n, long lsn, long commitMicros, long hash) {
    int slot = slot(n);
    this.lsn[slot] = lsn;
    this.commitMicros[slot] = commitMicros;
    this.hash[slot] = hash;
    int i = home(slot);
    while (index[i] != 0) {
      i = (i + 1) & mask;
    }
    index[i] = slot + 1;
  }

  /** Drops the oldest {@code n} identities (all it holds when it holds fewer). */
  void removeOldest(int n) {
    for (int k = 0; k < n && first < next; k++) {
      int slot = slot(first++);
      int i = home(slot);
      while (index[i] != slot + 1) {
        i = (i + 1) & mask;
      }
      removeAt(i);
    }
  }

  /**
   * Empties index entry {@code i}, moving back each entry after it in its run that would otherwise
   * no longer be found from its home.
   */
  private void removeAt(int i) {
    int j = i;
    while (true) {
      j = (j + 1) & mask;
      if (index[j] == 0) {
        break;
      }
      int home = home(index[j] - 1);
      boolean reachable = i <= j ? (i < home && home <= j) : (i < home || home <= j);
      if (!reachable) {
        index[i] = index[j];
        i = j;
      }
    }
    index[i] = 0;
  }

  /**
   * The identities numbered {@code from} to {@code from + count - 1}, each as {@link
   * InsertIdentity#writeTo} writes it.
   */
  byte[] bytes(long from, int count) {
    if (from < first || from + count > next) {
      throw new IllegalArgumentException(
          "Identities " + from + " to " + (from + count - 1) + " are not all held");
    }
    ByteBuffer out = ByteBuffer.allocate(count * InsertIdentity.BYTES);
    for (long n = from; n < from + count; n++) {
      int slot = slot(n);
      InsertIdentity.write(out, lsn[slot], commitMicros[slot], hash[slot]);
    }
    return out.array();
  }

  private int slot(long number) {
    return (int) (number % lsn.length);
  }

  private int home(int slot) {
    return home(lsn[slot], commitMicros[slot], hash[slot]);
  }

  private int home(long lsn, long commitMicros, long hash) {
    long mixed = (hash ^ lsn * 0xC2B2AE3D27D4EB4FL ^ commitMicros) * 0x9E3779B97F4A7C15L;
    return (int) (mixed >>> 32) & mask;
  }
}
