package dev.spillway.event;

import java.nio.ByteBuffer;

/**
 * What tells one captured insert from every other: the WAL position of the change, the commit time
 * of its transaction, and a 64-bit hash of its event up to the capture time. The same insert
 * published again (capture taken over, going on from its last stored position) has the same
 * identity. Several rows of one WAL record (a {@code COPY}) share the position and the commit time
 * and differ in their rows, so in the hash: two CRCs of different polynomials, which tell apart any
 * two events of one length that differ within 64 bits of each other. That they differ at all rests
 * on a buffer table having a primary key, which start-up checks.
 *
 * <p>Only inserts read from the WAL have one ({@link EventSerdes#identityOf}); rows a snapshot read
 * have no position of their own.
 */
public record InsertIdentity(long lsn, long commitMicros, long hash) {
  /** The length of an identity written by {@link #writeTo}. */
  public static final int BYTES = 3 * Long.BYTES;

  public void writeTo(ByteBuffer out) {
    write(out, lsn, commitMicros, hash);
  }

  /** Writes an identity given by its parts, as {@link #writeTo} does. */
  public static void write(ByteBuffer out, long lsn, long commitMicros, long hash) {
    out.putLong(lsn).putLong(commitMicros).putLong(hash);
  }

  /** The identity {@link #writeTo} wrote at the buffer's position, which moves past it. */
  public static InsertIdentity readFrom(ByteBuffer in) {
    return new InsertIdentity(in.getLong(), in.getLong(), in.getLong());
  }
}
