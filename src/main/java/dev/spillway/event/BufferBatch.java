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

  /**
   * A batch with the group id the batching stage gives these events once encoded ({@link
   * EventSerdes#encode(BufferEvent)}): from their source, table, WAL positions and commit times,
   * and for inserts read from the WAL a hash of each encoded event (the rows of one {@code COPY}
   * share a WAL record's position and commit time).
   */
  public static BufferBatch of(String buffer, List<BufferEvent> events) {
    String groupId =
        EventSerdes.encodeBufferBatch(buffer, events.stream().map(EventSerdes::encode).toList())
            .groupId();
    return new BufferBatch(groupId, buffer, events);
  }

  /** The same batch with fewer events (what is left after a partial success). */
  public BufferBatch withEvents(List<BufferEvent> remaining) {
    return new BufferBatch(groupId, buffer, remaining);
  }

  /**
   * The group id of a batch from this source database and table whose events are told apart by the
   * first {@code count} of {@code identities}: per event, in the batch's order, its LSN, its commit
   * time in microseconds and, for an insert read from the WAL, its hash.
   */
  static String groupId(String database, String table, long[] identities, int count) {
    byte[] source = (database + "/" + table).getBytes(StandardCharsets.UTF_8);
    ByteBuffer b = ByteBuffer.allocate(source.length + count * Long.BYTES);
    b.put(source);
    for (int i = 0; i < count; i++) {
      b.putLong(identities[i]);
    }
    return UUID.nameUUIDFromBytes(b.array()).toString();
  }
}
