package dev.spillway.event;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Objects;
import java.util.UUID;

/**
 * Events of one buffer table grouped for one bulk call.
 *
 * @param groupId the batch's idempotency key: the same events in the same order give the same id,
 *     so a batch formed again after a crash keeps it
 * @param buffer the buffer's name in the configuration
 * @param events at least one, in insert order
 */
public record BufferBatch(String groupId, String buffer, List<BufferEvent> events) {
  public BufferBatch {
    Objects.requireNonNull(groupId, "groupId");
    Objects.requireNonNull(buffer, "buffer");
    events = List.copyOf(events);
    if (events.isEmpty()) {
      throw new IllegalArgumentException("A batch of " + buffer + " without events");
    }
  }

  /** A batch whose group id is derived from its events' source, table and WAL positions. */
  public static BufferBatch of(String buffer, List<BufferEvent> events) {
    return new BufferBatch(groupId(events), buffer, events);
  }

  /** The same batch with fewer events (what is left after a partial success). */
  public BufferBatch withEvents(List<BufferEvent> remaining) {
    return new BufferBatch(groupId, buffer, remaining);
  }

  private static String groupId(List<BufferEvent> events) {
    BufferEvent first = events.get(0);
    long[] positions = new long[events.size() * 2];
    for (int i = 0; i < events.size(); i++) {
      positions[2 * i] = events.get(i).lsn();
      positions[2 * i + 1] = events.get(i).commitTimeMicros();
    }
    return groupId(first.database(), first.table().toString(), positions);
  }

  /**
   * The group id of a batch from this source database and table whose events have these WAL
   * positions and commit times: {@code positions} holds each event's LSN then its commit time in
   * microseconds, in the batch's order.
   */
  static String groupId(String database, String table, long[] positions) {
    byte[] source = (database + "/" + table).getBytes(StandardCharsets.UTF_8);
    ByteBuffer b = ByteBuffer.allocate(source.length + positions.length * Long.BYTES);
    b.put(source);
    for (long p : positions) {
      b.putLong(p);
    }
    return UUID.nameUUIDFromBytes(b.array()).toString();
  }
}
