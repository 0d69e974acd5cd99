package dev.spillway.event;

import java.nio.ByteBuffer;
import java.util.Optional;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.Headers;

/**
 * Where a captured change lies in its database's change stream, as capture read it: the LSN of the
 * last transaction committed before the change's own (Debezium's {@code sequence}, first element)
 * and the change's LSN. Changes come in commit order, so positions only grow along one stream; the
 * same change read again (capture taken over, going on from its last stored position) has the same
 * position. Several changes of one WAL record (a {@code COPY}) share one. The commit time of the
 * change's transaction goes with it, and is not part of the order.
 *
 * <p>Carried in the {@link #HEADER} header of the events capture publishes from the WAL; events a
 * snapshot read, and events written before the header, have none.
 */
public record StreamPosition(long lastCommitLsn, long lsn, long commitMicros)
    implements Comparable<StreamPosition> {
  public static final String HEADER = "spillway.position";

  /** The length of {@link #bytes()}. */
  public static final int BYTES = 3 * Long.BYTES;

  public byte[] bytes() {
    return ByteBuffer.allocate(BYTES)
        .putLong(lastCommitLsn)
        .putLong(lsn)
        .putLong(commitMicros)
        .array();
  }

  /** A position from its {@link #bytes()}. */
  public static StreamPosition of(byte[] bytes) {
    ByteBuffer b = ByteBuffer.wrap(bytes);
    return new StreamPosition(b.getLong(), b.getLong(), b.getLong());
  }

  /** The position in these headers, if they carry one. */
  public static Optional<StreamPosition> of(Headers headers) {
    Header h = headers.lastHeader(HEADER);
    if (h == null || h.value() == null || h.value().length != BYTES) {
      return Optional.empty();
    }
    return Optional.of(of(h.value()));
  }

  /**
   * The first element of Debezium's {@code sequence}, {@code ["24023928","24023960"]}: the LSN of
   * the last commit before the change; 0 when it is null or absent.
   */
  public static long lastCommitOf(String sequence) {
    if (sequence == null) {
      return 0;
    }
    int open = sequence.indexOf('[');
    int comma = sequence.indexOf(',', open + 1);
    if (open < 0 || comma < 0) {
      return 0;
    }
    String first = sequence.substring(open + 1, comma).trim();
    if (first.length() >= 2 && first.charAt(0) == '"') {
      first = first.substring(1, first.length() - 1);
    }
    try {
      return Long.parseLong(first);
    } catch (NumberFormatException e) {
      return 0; // null
    }
  }

  /** By place in the stream; the commit time is not compared. */
  @Override
  public int compareTo(StreamPosition o) {
    int c = Long.compareUnsigned(lastCommitLsn, o.lastCommitLsn);
    return c != 0 ? c : Long.compareUnsigned(lsn, o.lsn);
  }
}
