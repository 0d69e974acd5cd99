package dev.spillway.event;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;
import org.apache.kafka.common.errors.SerializationException;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.Serializer;

/**
 * Kafka serdes for events: Avro single-object encoding (a fingerprint of the writer schema, then
 * the binary body), so records are self-describing without a schema registry. A value that does not
 * decode raises {@link SerializationException}, which error handlers route to the dead-letter
 * topic.
 */
public final class EventSerdes {
  static {
    // Avro 1.12 refuses to instantiate generated classes outside trusted packages.
    String trusted = System.getProperty("org.apache.avro.SERIALIZABLE_PACKAGES", "");
    if (!trusted.contains("dev.spillway.event.avro")) {
      System.setProperty(
          "org.apache.avro.SERIALIZABLE_PACKAGES",
          trusted.isEmpty() ? "dev.spillway.event.avro" : trusted + ",dev.spillway.event.avro");
    }
  }

  private EventSerdes() {}

  public static Serde<DeletedRecord> deletedRecord() {
    return of(EventSerdes::encode, EventSerdes::decodeDeletedRecord);
  }

  public static Serde<BufferEvent> bufferEvent() {
    return of(EventSerdes::encode, EventSerdes::decodeBufferEvent);
  }

  public static byte[] encode(DeletedRecord r) {
    // The all-arguments constructor skips the builder's per-field validation: this runs once per
    // captured change.
    var avro =
        new dev.spillway.event.avro.DeletedRecord(
            r.database(),
            r.table().toString(),
            Columns.toAvro(r.key()),
            r.commitTimeMicros(),
            r.lsn(),
            r.capturedAtMillis());
    return bytes(() -> avro.toByteBuffer());
  }

  public static DeletedRecord decodeDeletedRecord(byte[] data) {
    var avro = decode(() -> dev.spillway.event.avro.DeletedRecord.fromByteBuffer(wrap(data)));
    return new DeletedRecord(
        avro.getDatabase(),
        TableName.parse(avro.getTable()),
        Columns.fromAvro(avro.getKey()),
        avro.getCommitTimeUs(),
        avro.getLsn(),
        avro.getCapturedAtMs());
  }

  public static byte[] encode(BufferEvent e) {
    var avro = toAvro(e);
    return bytes(() -> avro.toByteBuffer());
  }

  private static dev.spillway.event.avro.BufferEvent toAvro(BufferEvent e) {
    return new dev.spillway.event.avro.BufferEvent(
        e.database(),
        e.table().toString(),
        Columns.toAvro(e.row()),
        e.commitTimeMicros(),
        e.lsn(),
        e.capturedAtMillis());
  }

  public static BufferEvent decodeBufferEvent(byte[] data) {
    return fromAvro(decode(() -> dev.spillway.event.avro.BufferEvent.fromByteBuffer(wrap(data))));
  }

  private static BufferEvent fromAvro(dev.spillway.event.avro.BufferEvent avro) {
    return new BufferEvent(
        avro.getDatabase(),
        TableName.parse(avro.getTable()),
        Columns.fromAvro(avro.getRow()),
        avro.getCommitTimeUs(),
        avro.getLsn(),
        avro.getCapturedAtMs());
  }

  public static byte[] encode(CleanupBatch b) {
    var avro =
        new dev.spillway.event.avro.CleanupBatch(
            b.database(), b.table().toString(), b.ids(), b.oldestCommitTimeMicros());
    return bytes(() -> avro.toByteBuffer());
  }

  /**
   * @throws SerializationException when the bytes are not a cleanup batch
   * @throws IllegalArgumentException when it decodes but carries no ids
   */
  public static CleanupBatch decodeCleanupBatch(byte[] data) {
    var avro = decode(() -> dev.spillway.event.avro.CleanupBatch.fromByteBuffer(wrap(data)));
    return new CleanupBatch(
        avro.getDatabase(),
        TableName.parse(avro.getTable()),
        avro.getIds(),
        avro.getOldestCommitTimeUs());
  }

  public static byte[] encode(BufferBatch b) {
    List<dev.spillway.event.avro.BufferEvent> events = new ArrayList<>(b.events().size());
    for (BufferEvent e : b.events()) {
      events.add(toAvro(e));
    }
    var avro = new dev.spillway.event.avro.BufferBatch(b.groupId(), b.buffer(), events);
    return bytes(() -> avro.toByteBuffer());
  }

  public static BufferBatch decodeBufferBatch(byte[] data) {
    var avro = decode(() -> dev.spillway.event.avro.BufferBatch.fromByteBuffer(wrap(data)));
    List<BufferEvent> events = new ArrayList<>(avro.getEvents().size());
    for (var e : avro.getEvents()) {
      events.add(fromAvro(e));
    }
    try {
      return new BufferBatch(avro.getGroupId(), avro.getBuffer(), events);
    } catch (IllegalArgumentException e) {
      throw new SerializationException("Not a Spillway batch: " + e.getMessage(), e);
    }
  }

  private static <T> Serde<T> of(Function<T, byte[]> encode, Function<byte[], T> decode) {
    Serializer<T> serializer = (topic, value) -> value == null ? null : encode.apply(value);
    Deserializer<T> deserializer = (topic, data) -> data == null ? null : decode.apply(data);
    return Serdes.serdeFrom(serializer, deserializer);
  }

  private interface IoSupplier<T> {
    T get() throws IOException;
  }

  private static byte[] bytes(IoSupplier<ByteBuffer> encoded) {
    try {
      ByteBuffer b = encoded.get();
      byte[] out = new byte[b.remaining()];
      b.get(out);
      return out;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static <T> T decode(IoSupplier<T> decoder) {
    try {
      return decoder.get();
    } catch (IOException | RuntimeException e) {
      throw new SerializationException("Not a Spillway event: " + e.getMessage(), e);
    }
  }

  private static ByteBuffer wrap(byte[] data) {
    if (data == null) {
      throw new SerializationException("Not a Spillway event: null payload");
    }
    return ByteBuffer.wrap(data);
  }
}
