package dev.spillway.event;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.apache.avro.Schema;
import org.apache.avro.SchemaNormalization;
import org.apache.avro.io.BinaryEncoder;
import org.apache.avro.io.EncoderFactory;
import org.apache.kafka.common.errors.SerializationException;
import org.junit.jupiter.api.Test;

class EventSerdesTest {
  private static final TableName TABLE = new TableName("public", "contact_activity_events");

  /** The group id the first schema's batch fixture carries, of its two events. */
  private static final String FIRST_SCHEMA_GROUP = "f6c6b1cf-d103-3a8c-95a7-3303ebb47ff8";

  @Test
  void should_build_a_batch_from_encoded_events_byte_for_byte_as_encoding_the_batch_does() {
    Random random = new Random(7);
    for (int size : new int[] {1, 2, 3, 64, 1000}) {
      List<BufferEvent> events = new ArrayList<>();
      for (int i = 0; i < size; i++) {
        events.add(event(random, i));
      }
      List<byte[]> encoded = events.stream().map(EventSerdes::encode).toList();

      EventSerdes.EncodedBatch spliced = EventSerdes.encodeBufferBatch("activity-é", encoded);

      BufferBatch batch = BufferBatch.of("activity-é", events);
      assertThat(spliced.groupId()).isEqualTo(batch.groupId());
      assertThat(spliced.bytes()).isEqualTo(EventSerdes.encode(batch));
      assertThat(EventSerdes.decodeBufferBatch(spliced.bytes()).events()).hasSize(size);
    }
  }

  @Test
  void should_give_batches_of_different_rows_of_one_wal_record_different_group_ids() {
    // A COPY's rows of one page: one WAL record, so one position and commit time, one transaction.
    List<BufferEvent> events = new ArrayList<>();
    for (int i = 0; i < 8; i++) {
      Map<String, Object> row = new LinkedHashMap<>();
      row.put("id", (long) i);
      row.put("activity", "call");
      events.add(
          new BufferEvent(
              "main", TABLE, row, 1_700_000_000_000_000L, 0x1000_0040L, 1_700_000_000_000L, 777L));
    }
    List<byte[]> copied = events.stream().map(EventSerdes::encode).toList();

    String first = EventSerdes.encodeBufferBatch("activity", copied.subList(0, 4)).groupId();
    String second = EventSerdes.encodeBufferBatch("activity", copied.subList(4, 8)).groupId();

    assertThat(first).isNotEqualTo(second);
    assertThat(EventSerdes.encodeBufferBatch("activity", copied.subList(0, 4)).groupId())
        .as("the same events again")
        .isEqualTo(first);
    assertThat(BufferBatch.of("activity", events.subList(4, 8)).groupId()).isEqualTo(second);
  }

  @Test
  void should_refuse_to_batch_what_is_not_a_buffer_event() {
    byte[] event = EventSerdes.encode(event(new Random(1), 1));
    byte[] deleted =
        EventSerdes.encode(
            new DeletedRecord("main", TABLE, Map.of("id", 1L), 1_000_000L, 42L, 1_000L));
    byte[] truncated = Arrays.copyOf(event, event.length - 3);
    byte[] longer = Arrays.copyOf(event, event.length + 1);

    assertThatThrownBy(() -> EventSerdes.encodeBufferBatch("b", List.of(event, deleted)))
        .isInstanceOf(SerializationException.class)
        .hasMessageContaining("event 1 of the batch");
    assertThatThrownBy(() -> EventSerdes.encodeBufferBatch("b", List.of(truncated)))
        .isInstanceOf(SerializationException.class);
    assertThatThrownBy(() -> EventSerdes.encodeBufferBatch("b", List.of(longer)))
        .isInstanceOf(SerializationException.class)
        .hasMessageContaining("past its end");
    assertThatThrownBy(
            () ->
                EventSerdes.encodeBufferBatch(
                    "b", List.of("text".getBytes(StandardCharsets.UTF_8))))
        .isInstanceOf(SerializationException.class);
  }

  @Test
  void should_refuse_a_record_declaring_a_string_past_its_end_without_making_room_for_it() {
    // A record's header, then a first string (the database's name) said to be 2 GiB long.
    byte[] deleted =
        EventSerdes.encode(
            new DeletedRecord("main", TABLE, Map.of("id", 1L), 1_000_000L, 42L, 1_000L));
    byte[] earlierEvent = fixture("buffer-event-1.hex");
    for (byte[] record : List.of(deleted, earlierEvent)) {
      byte[] corrupt = withHugeFirstString(Arrays.copyOf(record, 10));
      com.sun.management.ThreadMXBean threads =
          (com.sun.management.ThreadMXBean)
              java.lang.management.ManagementFactory.getThreadMXBean();
      long thread = Thread.currentThread().getId();
      long before = threads.getThreadAllocatedBytes(thread);
      assertThatThrownBy(
              () -> {
                if (record == deleted) {
                  EventSerdes.decodeDeletedRecord(corrupt);
                } else {
                  EventSerdes.decodeBufferEvent(corrupt);
                }
              })
          .isInstanceOf(SerializationException.class);
      assertThat(threads.getThreadAllocatedBytes(thread) - before)
          .as("bytes allocated to find it corrupt (Avro's reader made room for the 2 GiB)")
          .isLessThan(64L << 20);
    }
  }

  private static byte[] withHugeFirstString(byte[] header) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    out.writeBytes(header);
    BinaryEncoder e = EncoderFactory.get().directBinaryEncoder(out, null);
    try {
      e.writeInt(Integer.MAX_VALUE - 8);
      e.writeFixed("main".getBytes(StandardCharsets.UTF_8));
      e.flush();
    } catch (IOException ex) {
      throw new UncheckedIOException(ex);
    }
    return out.toByteArray();
  }

  @Test
  void should_give_an_insert_published_again_the_identity_it_had_the_first_time() {
    Random random = new Random(3);
    for (int capturedLength = 1; capturedLength <= 10; capturedLength++) {
      for (int txLength = 1; txLength <= 10; txLength++) {
        BufferEvent e = event(random, capturedLength * 10 + txLength);
        long txId = ofLength(txLength, 3);
        // Capture times of one length, every byte of their encodings different.
        BufferEvent first = withIds(e, ofLength(capturedLength, 1), txId);
        BufferEvent again = withIds(e, ofLength(capturedLength, 2), txId);
        InsertIdentity id = EventSerdes.identityOf(EventSerdes.encode(first)).orElseThrow();

        assertThat(EventSerdes.identityOf(EventSerdes.encode(again))).hasValue(id);
        assertThat(id.lsn()).isEqualTo(e.lsn());
        assertThat(id.commitMicros()).isEqualTo(e.commitTimeMicros());
        // The last byte before the capture time is the LSN's: it is in the hash.
        BufferEvent next =
            new BufferEvent(
                e.database(),
                e.table(),
                e.row(),
                e.commitTimeMicros(),
                e.lsn() + 1,
                first.capturedAtMillis(),
                txId);
        assertThat(EventSerdes.identityOf(EventSerdes.encode(next)).orElseThrow().hash())
            .isNotEqualTo(id.hash());
      }
    }
  }

  /**
   * A long whose Avro encoding takes {@code length} bytes, each of its seven-bit groups {@code
   * group} (1 to 126), so that two of one length and different groups differ in every byte.
   */
  private static long ofLength(int length, int group) {
    long zigZag = 0;
    for (int i = 0; i < length; i++) {
      zigZag |= (long) group << (7 * i);
    }
    return (zigZag >>> 1) ^ -(zigZag & 1);
  }

  @Test
  void should_give_back_a_row_s_and_a_key_s_columns_in_the_order_they_were_written() {
    // Twenty names whose hash order differs from the table's: a handler gets them as the table has.
    Map<String, Object> row = new LinkedHashMap<>();
    for (int c = 20; c > 0; c--) {
      row.put("column_" + (char) ('a' + c), c);
    }
    List<String> order = List.copyOf(row.keySet());
    BufferEvent event = new BufferEvent("main", TABLE, row, 1L, 2L, 3L, 4L);
    DeletedRecord deleted = new DeletedRecord("main", TABLE, row, 1L, 2L, 3L);

    assertThat(EventSerdes.decodeBufferEvent(EventSerdes.encode(event)).row().keySet())
        .containsExactlyElementsOf(order);
    assertThat(
            EventSerdes.decodeBufferBatch(
                    EventSerdes.encode(new BufferBatch("g", "b", List.of(event, event))))
                .events())
        .allSatisfy(e -> assertThat(e.row().keySet()).containsExactlyElementsOf(order));
    assertThat(EventSerdes.decodeDeletedRecord(EventSerdes.encode(deleted)).key().keySet())
        .containsExactlyElementsOf(order);
  }

  @Test
  void should_count_the_bytes_of_a_long_as_avro_writes_it() throws IOException {
    List<Long> longs = new ArrayList<>(List.of(0L, Long.MIN_VALUE, Long.MAX_VALUE));
    for (int bits = 0; bits < 63; bits++) {
      for (long n : new long[] {1L << bits, (1L << bits) - 1, (1L << bits) + 1}) {
        longs.add(n);
        longs.add(-n);
      }
    }
    for (long n : longs) {
      ByteArrayOutputStream bytes = new ByteArrayOutputStream();
      BinaryEncoder out = EncoderFactory.get().directBinaryEncoder(bytes, null);
      out.writeLong(n);
      out.flush();
      assertThat(EventSerdes.varLongLength(n)).as("%d", n).isEqualTo(bytes.size());
    }
  }

  @Test
  void should_tell_apart_inserts_that_differ_in_a_column_position_or_commit() {
    Map<String, Object> row = new LinkedHashMap<>();
    row.put("id", 1L);
    row.put("note", "a");
    BufferEvent e = new BufferEvent("main", TABLE, row, 1_000L, 2_000L, 3L, 4L);
    Map<String, Object> other = new LinkedHashMap<>(row);
    other.put("note", "b");
    InsertIdentity id = EventSerdes.identityOf(EventSerdes.encode(e)).orElseThrow();
    // The hash alone tells each apart, the position and commit being fields of their own too.
    assertThat(
            List.of(
                new BufferEvent("main", TABLE, other, 1_000L, 2_000L, 3L, 4L),
                new BufferEvent("main", TABLE, row, 1_000L, 2_001L, 3L, 4L),
                new BufferEvent("main", TABLE, row, 1_001L, 2_000L, 3L, 4L),
                new BufferEvent("other", TABLE, row, 1_000L, 2_000L, 3L, 4L)))
        .allSatisfy(
            o ->
                assertThat(EventSerdes.identityOf(EventSerdes.encode(o)).orElseThrow().hash())
                    .isNotEqualTo(id.hash()));
  }

  @Test
  void should_give_no_identity_to_a_row_a_snapshot_read_nor_to_an_earlier_version_s_event() {
    BufferEvent read = withIds(event(new Random(5), 1), 1_000L, 0);
    assertThat(EventSerdes.identityOf(EventSerdes.encode(read))).isEmpty();
    assertThat(EventSerdes.identityOf(fixture("buffer-event-1.hex"))).isEmpty();
    assertThatThrownBy(() -> EventSerdes.identityOf("text".getBytes(StandardCharsets.UTF_8)))
        .isInstanceOf(SerializationException.class);
  }

  private static BufferEvent withIds(BufferEvent e, long capturedAt, long txId) {
    return new BufferEvent(
        e.database(), e.table(), e.row(), e.commitTimeMicros(), e.lsn(), capturedAt, txId);
  }

  @Test
  void should_read_the_buffer_events_and_batches_the_first_schema_wrote() {
    // Written by the version before transaction ids: records still in Kafka after an upgrade.
    BufferEvent e = EventSerdes.decodeBufferEvent(fixture("buffer-event-1.hex"));
    BufferBatch b = EventSerdes.decodeBufferBatch(fixture("buffer-batch-1.hex"));

    assertThat(e.database()).isEqualTo("main");
    assertThat(e.table()).isEqualTo(TABLE);
    assertThat(e.row())
        .containsEntry("id", 41L)
        .containsEntry("contact_id", 7)
        .containsEntry("activity", "call")
        .containsEntry("score", 0.5d)
        .containsEntry("note", null);
    assertThat((byte[]) e.row().get("payload")).containsExactly(1, 2, 3);
    assertThat(e.commitTimeMicros()).isEqualTo(1_700_000_000_000_001L);
    assertThat(e.lsn()).isEqualTo(0x1000_0040L);
    assertThat(e.capturedAtMillis()).isEqualTo(1_700_000_000_002L);
    assertThat(e.txId()).as("unknown").isZero();
    assertThat(b.groupId()).isEqualTo(FIRST_SCHEMA_GROUP);
    assertThat(b.buffer()).isEqualTo("activity");
    assertThat(b.events()).extracting(x -> x.row().get("id")).containsExactly(41L, 42L);
    assertThat(b.events().get(1).row()).containsEntry("activity", "e-mail ✉");
  }

  @Test
  void should_batch_events_the_first_schema_wrote_under_the_group_id_it_gave_them() {
    byte[] first = fixture("buffer-event-1.hex");
    byte[] second = fixture("buffer-event-1b.hex");
    BufferEvent secondNow = EventSerdes.decodeBufferEvent(second);

    EventSerdes.EncodedBatch old =
        EventSerdes.encodeBufferBatch("activity", List.of(first, second));
    EventSerdes.EncodedBatch mixed =
        EventSerdes.encodeBufferBatch("activity", List.of(first, EventSerdes.encode(secondNow)));

    assertThat(old.groupId()).isEqualTo(FIRST_SCHEMA_GROUP);
    assertThat(mixed.groupId()).isEqualTo(FIRST_SCHEMA_GROUP);
    assertThat(mixed.bytes()).isEqualTo(old.bytes());
    assertThat(EventSerdes.decodeBufferBatch(old.bytes()).events())
        .extracting(BufferEvent::lsn)
        .containsExactly(0x1000_0040L, 0x1000_0080L);
  }

  @Test
  void should_read_the_deleted_records_and_cleanup_batches_the_first_schema_wrote() {
    // Written by the version before transaction ids: records still in Kafka after an upgrade.
    DeletedRecord d = EventSerdes.decodeDeletedRecord(fixture("deleted-record-1.hex"));
    CleanupBatch b = EventSerdes.decodeCleanupBatch(fixture("cleanup-batch-1.hex"));

    TableName projects = new TableName("public", "projects");
    assertThat(d)
        .isEqualTo(
            new DeletedRecord(
                "main",
                projects,
                Map.of("id", 41L),
                1_700_000_000_000_001L,
                0x1000_0040L,
                1_700_000_000_002L,
                0));
    assertThat(b)
        .isEqualTo(
            new CleanupBatch(
                "main", projects, List.of("41", "42"), 1_700_000_000_000_001L, List.of()));
    assertThat(b.txId(1)).as("unknown").isZero();
  }

  @Test
  void should_carry_the_deleting_transactions_through_records_and_batches() {
    TableName projects = new TableName("public", "projects");
    DeletedRecord d =
        new DeletedRecord("main", projects, Map.of("id", 41L), 1, 2, 3, 4_000_000_000L);
    CleanupBatch b = new CleanupBatch("main", projects, List.of("41", "42"), 1, List.of(7L, 0L));

    assertThat(EventSerdes.decodeDeletedRecord(EventSerdes.encode(d))).isEqualTo(d);
    assertThat(EventSerdes.decodeCleanupBatch(EventSerdes.encode(b)).txIds())
        .containsExactly(7L, 0L);
    assertThatThrownBy(() -> new CleanupBatch("main", projects, List.of("41"), 1, List.of(7L, 8L)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("A cleanup batch of 1 ids with 2 transaction ids");
  }

  @Test
  void should_write_the_schemas_of_this_release() {
    // Records outlive the version that wrote them. A schema changed here must leave its released
    // version readable (kept under avro/ and put in a schema store its decoder reads through), with
    // a fixture the release wrote, and only then does its new fingerprint join this list. (The
    // fingerprint leaves out defaults and docs: the fixtures' tests catch a default dropped.)
    assertThat(
            Map.of(
                "BufferEvent", fingerprint(dev.spillway.event.avro.BufferEvent.getClassSchema()),
                "BufferBatch", fingerprint(dev.spillway.event.avro.BufferBatch.getClassSchema()),
                "DeletedRecord",
                    fingerprint(dev.spillway.event.avro.DeletedRecord.getClassSchema()),
                "CleanupBatch", fingerprint(dev.spillway.event.avro.CleanupBatch.getClassSchema())))
        .isEqualTo(
            Map.of(
                "BufferEvent", "3b384198d30dfde5",
                "BufferBatch", "73453427d328c608",
                "DeletedRecord", "2212654005947816",
                "CleanupBatch", "907fb50cb4c26168"));
  }

  private static String fingerprint(Schema schema) {
    return Long.toHexString(SchemaNormalization.parsingFingerprint64(schema));
  }

  /** Bytes kept as hex under this package's test resources. */
  private static byte[] fixture(String name) {
    try (InputStream in = EventSerdesTest.class.getResourceAsStream(name)) {
      assertThat(in).as(name).isNotNull();
      return HexFormat.of()
          .parseHex(new String(in.readAllBytes(), StandardCharsets.US_ASCII).strip());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** An event whose row holds every kind of value a column can carry, some of them null. */
  private static BufferEvent event(Random random, int i) {
    Map<String, Object> row = new LinkedHashMap<>();
    row.put("id", (long) i);
    row.put("contact_id", random.nextInt());
    row.put("activity", random.nextBoolean() ? "call" : "e-mail ✉ " + random.nextLong());
    row.put("score", random.nextDouble());
    row.put("ratio", random.nextFloat());
    row.put("flag", random.nextBoolean());
    row.put("note", random.nextInt(3) == 0 ? null : "n" + i);
    byte[] blob = new byte[random.nextInt(40)];
    random.nextBytes(blob);
    row.put("payload", blob);
    return new BufferEvent(
        "main",
        TABLE,
        row,
        1_700_000_000_000_000L + random.nextInt(1_000_000),
        0x1000_0000L + 64L * i,
        1_700_000_000_000L + i,
        1_000L + i);
  }
}
