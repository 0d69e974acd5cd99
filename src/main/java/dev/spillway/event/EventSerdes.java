package dev.spillway.event;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Optional;
import java.util.function.Function;
import java.util.zip.CRC32;
import java.util.zip.CRC32C;
import org.apache.avro.Schema;
import org.apache.avro.SchemaNormalization;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.io.BinaryDecoder;
import org.apache.avro.io.BinaryEncoder;
import org.apache.avro.io.DecoderFactory;
import org.apache.avro.io.EncoderFactory;
import org.apache.avro.message.BinaryMessageDecoder;
import org.apache.avro.message.SchemaStore;
import org.apache.avro.specific.SpecificData;
import org.apache.avro.util.ClassSecurityValidator;
import org.apache.avro.util.ClassSecurityValidator.ClassSecurityPredicate;
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
    // Avro 1.12 makes instances only of classes it trusts. Its system property is read once, by
    // whatever touches Avro first (a handler class may), so the generated classes are added to the
    // trust Avro checks each time instead.
    ClassSecurityPredicate before = ClassSecurityValidator.getGlobal();
    ClassSecurityValidator.setGlobal(
        new ClassSecurityPredicate() {
          @Override
          public boolean isTrusted(Class<?> c) {
            return c.getPackageName().equals("dev.spillway.event.avro") || before.isTrusted(c);
          }

          @Override
          public void forbiddenClass(String className) {
            before.forbiddenClass(className); // whatever the application chose: throw, or warn
          }
        });
  }

  private static final byte[] SINGLE_OBJECT_MARKER = {(byte) 0xC3, (byte) 0x01};

  /**
   * The schemas earlier versions wrote, which records in Kafka (and events a batcher holds in its
   * store) may still carry: read as this version's, a field added since taking its default. Each is
   * the schema as released, kept under {@code avro/}.
   */
  private static final Schema EVENT_1 = released("BufferEvent.1.avsc");

  private static final Schema BATCH_1 = released("BufferBatch.1.avsc");

  private static final Schema DELETED_1 = released("DeletedRecord.1.avsc");

  private static final Schema CLEANUP_1 = released("CleanupBatch.1.avsc");

  /**
   * Avro's model of the generated classes, but for the maps it reads: they keep the order their
   * entries were written in (Avro's own are hash maps), so a row's columns reach a handler in the
   * table's order, as capture read them.
   */
  private static final SpecificData IN_ORDER =
      new SpecificData() {
        @Override
        public Object newMap(Object old, int size) {
          return new LinkedHashMap<>(Math.max(16, size * 4 / 3 + 1));
        }
      };

  private static final BinaryMessageDecoder<dev.spillway.event.avro.BufferEvent> EVENTS =
      new BinaryMessageDecoder<>(
          IN_ORDER, dev.spillway.event.avro.BufferEvent.getClassSchema(), store(EVENT_1));
  private static final BinaryMessageDecoder<dev.spillway.event.avro.BufferBatch> BATCHES =
      new BinaryMessageDecoder<>(
          IN_ORDER, dev.spillway.event.avro.BufferBatch.getClassSchema(), store(BATCH_1));
  private static final BinaryMessageDecoder<dev.spillway.event.avro.DeletedRecord> DELETED =
      new BinaryMessageDecoder<>(
          IN_ORDER, dev.spillway.event.avro.DeletedRecord.getClassSchema(), store(DELETED_1));
  private static final BinaryMessageDecoder<dev.spillway.event.avro.CleanupBatch> CLEANUPS =
      new BinaryMessageDecoder<>(
          IN_ORDER, dev.spillway.event.avro.CleanupBatch.getClassSchema(), store(CLEANUP_1));

  private static final byte[] EVENT_HEADER =
      singleObjectHeader(dev.spillway.event.avro.BufferEvent.getClassSchema());
  private static final byte[] EVENT_1_HEADER = singleObjectHeader(EVENT_1);
  private static final byte[] DELETED_HEADER =
      singleObjectHeader(dev.spillway.event.avro.DeletedRecord.getClassSchema());
  private static final byte[] DELETED_1_HEADER = singleObjectHeader(DELETED_1);
  private static final byte[] BATCH_HEADER =
      singleObjectHeader(dev.spillway.event.avro.BufferBatch.getClassSchema());
  private static final Schema ROW =
      dev.spillway.event.avro.BufferEvent.getClassSchema().getField("row").schema();

  /** Bytes of a group id (a UUID's text) and the most a length prefix takes. */
  private static final int GROUP_ID_LENGTH = 36;

  private static final int MAX_VARINT = 10;

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
            r.capturedAtMillis(),
            r.txId());
    return bytes(() -> avro.toByteBuffer());
  }

  public static DeletedRecord decodeDeletedRecord(byte[] data) {
    stepOver(data, DELETED_HEADER, dev.spillway.event.avro.DeletedRecord.getClassSchema());
    stepOver(data, DELETED_1_HEADER, DELETED_1);
    var avro = decode(() -> DELETED.decode(wrap(data)));
    return new DeletedRecord(
        avro.getDatabase(),
        TableName.parse(avro.getTable()),
        Columns.fromAvro(avro.getKey()),
        avro.getCommitTimeUs(),
        avro.getLsn(),
        avro.getCapturedAtMs(),
        avro.getTxId());
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
        e.capturedAtMillis(),
        e.txId());
  }

  /**
   * @throws SerializationException when the value is not a buffer event, also when one of this
   *     version's schema goes on past its end (Avro's message decoder would stop before it, but the
   *     batches built from it would not)
   */
  public static BufferEvent decodeBufferEvent(byte[] data) {
    if (startsWith(data, EVENT_HEADER)) {
      readBody(decoder(data, null), false, -1);
    }
    stepOver(data, EVENT_1_HEADER, EVENT_1);
    return fromAvro(decode(() -> EVENTS.decode(wrap(data))));
  }

  /**
   * The identity of a buffer event capture read from the WAL, from its encoding: its position and
   * commit time, and a hash of its body up to its capture time, which differs when the event is
   * published again (the transaction id after it does not, and is left out with it). None for a row
   * a snapshot read (transaction id 0) and for an event an earlier version wrote.
   *
   * @throws SerializationException when the value is not a buffer event this version reads
   */
  public static Optional<InsertIdentity> identityOf(byte[] event) {
    if (!startsWith(event, EVENT_HEADER)) {
      if (startsWith(event, EVENT_1_HEADER)) {
        return Optional.empty();
      }
      throw new SerializationException(
          "Not a Spillway buffer event of a schema this version reads");
    }
    EventTail tail = readBody(decoder(event, null), false, -1);
    if (tail.txId() == 0) {
      return Optional.empty();
    }
    return Optional.of(new InsertIdentity(tail.lsn(), tail.commitMicros(), hash(event, tail)));
  }

  /** The 64-bit hash of a buffer event's body up to its capture time. */
  private static long hash(byte[] event, EventTail tail) {
    int length =
        bodyLength(event) - varLongLength(tail.capturedAtMillis()) - varLongLength(tail.txId());
    CRC32C c = new CRC32C();
    c.update(event, EVENT_HEADER.length, length);
    CRC32 d = new CRC32();
    d.update(event, EVENT_HEADER.length, length);
    return c.getValue() << 32 | d.getValue();
  }

  /**
   * What a buffer event's body says besides its row: its names (null when stepped over), then what
   * ends it, in the schema's order.
   */
  private record EventTail(
      String database,
      String table,
      long commitMicros,
      long lsn,
      long capturedAtMillis,
      long txId) {}

  private static BinaryDecoder decoder(byte[] event, BinaryDecoder reuse) {
    return DecoderFactory.get().binaryDecoder(event, EVENT_HEADER.length, bodyLength(event), reuse);
  }

  /**
   * Reads a buffer event's body of this version's schema, its row stepped over, to its end.
   *
   * @param names whether to read its database and table names, or step over them
   * @param index the event's place in a batch, for the message; -1 for an event alone
   * @throws SerializationException when it is cut short or goes on past its end
   */
  private static EventTail readBody(BinaryDecoder in, boolean names, int index) {
    try {
      String database = null;
      String table = null;
      if (names) {
        database = in.readString();
        table = in.readString();
      } else {
        in.skipString();
        in.skipString();
      }
      GenericDatumReader.skip(ROW, in);
      EventTail tail =
          new EventTail(
              database, table, in.readLong(), in.readLong(), in.readLong(), in.readLong());
      if (!in.isEnd()) {
        throw new SerializationException(
            "Not a Spillway event: "
                + (index < 0 ? "it" : "event " + index + " of the batch")
                + " goes on past its end");
      }
      return tail;
    } catch (SerializationException e) {
      throw e;
    } catch (IOException | RuntimeException e) {
      throw new SerializationException("Not a Spillway event: " + e.getMessage(), e);
    }
  }

  /** Bytes Avro's binary encoding of this long takes: zig-zag, then seven bits a byte. */
  static int varLongLength(long n) {
    long zigZag = (n << 1) ^ (n >> 63);
    return Math.max(1, (Long.SIZE - Long.numberOfLeadingZeros(zigZag) + 6) / 7);
  }

  private static BufferEvent fromAvro(dev.spillway.event.avro.BufferEvent avro) {
    return new BufferEvent(
        avro.getDatabase(),
        TableName.parse(avro.getTable()),
        Columns.fromAvro(avro.getRow()),
        avro.getCommitTimeUs(),
        avro.getLsn(),
        avro.getCapturedAtMs(),
        avro.getTxId());
  }

  public static byte[] encode(CleanupBatch b) {
    var avro =
        new dev.spillway.event.avro.CleanupBatch(
            b.database(), b.table().toString(), b.ids(), b.oldestCommitTimeMicros(), b.txIds());
    return bytes(() -> avro.toByteBuffer());
  }

  /**
   * @throws SerializationException when the bytes are not a cleanup batch
   * @throws IllegalArgumentException when it decodes but carries no ids, or transaction ids not one
   *     per id
   */
  public static CleanupBatch decodeCleanupBatch(byte[] data) {
    var avro = decode(() -> CLEANUPS.decode(wrap(data)));
    return new CleanupBatch(
        avro.getDatabase(),
        TableName.parse(avro.getTable()),
        avro.getIds(),
        avro.getOldestCommitTimeUs(),
        avro.getTxIds());
  }

  public static byte[] encode(BufferBatch b) {
    List<dev.spillway.event.avro.BufferEvent> events = new ArrayList<>(b.events().size());
    for (BufferEvent e : b.events()) {
      events.add(toAvro(e));
    }
    var avro = new dev.spillway.event.avro.BufferBatch(b.groupId(), b.buffer(), events);
    return bytes(() -> avro.toByteBuffer());
  }

  /** An encoded batch and its group id. */
  public record EncodedBatch(String groupId, byte[] bytes) {}

  /**
   * The batch of these encoded buffer events, byte for byte as {@link #encode(BufferBatch)} writes
   * it, built from their encodings: each event's body is copied as it is. Of each event only the
   * source, WAL position, commit time and transaction id are decoded, for the group id (with a hash
   * of the body for an insert read from the WAL); its row is stepped over (which also finds an
   * event cut short or running past its end). This is how the batcher builds every batch. An event
   * an earlier version wrote is read and written again in this version's schema first.
   *
   * @param events at least one, each written by {@link #encode(BufferEvent)}, in this version or an
   *     earlier one
   * @throws SerializationException when one is not
   */
  public static EncodedBatch encodeBufferBatch(String buffer, List<byte[]> events) {
    if (events.isEmpty()) {
      throw new IllegalArgumentException("A batch of " + buffer + " without events");
    }
    // Per event its position and commit time, and for one read from the WAL its hash: the rows of
    // one WAL record (a COPY) share the first two, so batches of different rows would share an id.
    long[] identities = new long[events.size() * 3];
    int parts = 0;
    String database = null; // and table: the first event's
    String table = null;
    int size = BATCH_HEADER.length + 2 * MAX_VARINT + buffer.length() * 3 + GROUP_ID_LENGTH + 1;
    BinaryDecoder in = null;
    byte[][] bodies = events.toArray(new byte[0][]);
    for (int i = 0; i < bodies.length; i++) {
      byte[] e = bodies[i];
      if (!startsWith(e, EVENT_HEADER)) {
        if (!startsWith(e, EVENT_1_HEADER)) {
          throw new SerializationException(
              "Not a Spillway buffer event of a schema this version reads: event "
                  + i
                  + " of the batch");
        }
        // Written before an upgrade: rare, so decoded and written again rather than spliced.
        e = encode(decodeBufferEvent(e));
        bodies[i] = e;
      }
      in = decoder(e, in);
      EventTail tail = readBody(in, i == 0, i);
      if (i == 0) {
        database = tail.database();
        table = tail.table();
      }
      identities[parts++] = tail.lsn();
      identities[parts++] = tail.commitMicros();
      if (tail.txId() != 0) {
        identities[parts++] = hash(e, tail);
      }
      size += bodyLength(e);
    }
    String groupId = BufferBatch.groupId(database, table, identities, parts);
    ByteArrayOutputStream bytes = new ByteArrayOutputStream(size);
    bytes.writeBytes(BATCH_HEADER);
    BinaryEncoder out = EncoderFactory.get().directBinaryEncoder(bytes, null);
    try {
      out.writeString(groupId);
      out.writeString(buffer);
      out.writeArrayStart();
      out.setItemCount(bodies.length);
      for (byte[] e : bodies) {
        out.startItem();
        out.writeFixed(e, EVENT_HEADER.length, bodyLength(e));
      }
      out.writeArrayEnd();
      out.flush();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return new EncodedBatch(groupId, bytes.toByteArray());
  }

  private static boolean startsWith(byte[] value, byte[] header) {
    return value != null
        && value.length >= header.length
        && Arrays.equals(value, 0, header.length, header, 0, header.length);
  }

  /**
   * Steps over the body of a record of {@code schema} (when {@code data} has its header) without
   * keeping anything of it, so a length or a count it declares past its end fails here: Avro's
   * reader makes room for a string or a map before it reads them, and a record saying 2 GiB would
   * fail the batching thread with an {@link OutOfMemoryError} instead of going to the dead letters.
   */
  private static void stepOver(byte[] data, byte[] header, Schema schema) {
    if (!startsWith(data, header)) {
      return;
    }
    decode(
        () -> {
          GenericDatumReader.skip(
              schema,
              DecoderFactory.get()
                  .binaryDecoder(data, header.length, data.length - header.length, null));
          return null;
        });
  }

  private static int bodyLength(byte[] event) {
    return event.length - EVENT_HEADER.length;
  }

  /**
   * What Avro's single-object encoding puts before a record of this schema: its marker, then the
   * schema's 64-bit fingerprint.
   */
  private static byte[] singleObjectHeader(Schema schema) {
    try {
      byte[] fingerprint = SchemaNormalization.parsingFingerprint("CRC-64-AVRO", schema);
      byte[] header = new byte[SINGLE_OBJECT_MARKER.length + fingerprint.length];
      System.arraycopy(SINGLE_OBJECT_MARKER, 0, header, 0, SINGLE_OBJECT_MARKER.length);
      System.arraycopy(fingerprint, 0, header, SINGLE_OBJECT_MARKER.length, fingerprint.length);
      return header;
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  private static Schema released(String file) {
    try (InputStream in = EventSerdes.class.getResourceAsStream("avro/" + file)) {
      if (in == null) {
        throw new IllegalStateException("The schema avro/" + file + " is missing from the build");
      }
      return new Schema.Parser().parse(in);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static SchemaStore store(Schema... released) {
    SchemaStore.Cache store = new SchemaStore.Cache();
    for (Schema s : released) {
      store.addSchema(s);
    }
    return store;
  }

  public static BufferBatch decodeBufferBatch(byte[] data) {
    var avro = decode(() -> BATCHES.decode(wrap(data)));
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
