package dev.spillway.capture;

import static org.assertj.core.api.Assertions.assertThat;

import dev.spillway.event.BufferEvent;
import dev.spillway.event.DeletedRecord;
import dev.spillway.event.EventSerdes;
import dev.spillway.event.TableName;
import io.debezium.time.Date;
import io.debezium.time.MicroTime;
import io.debezium.time.MicroTimestamp;
import io.debezium.time.NanoTimestamp;
import io.debezium.time.Time;
import io.debezium.time.Timestamp;
import io.debezium.time.ZonedTimestamp;
import java.nio.ByteBuffer;
import java.time.Clock;
import java.time.Instant;
import java.time.LocalDate;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.source.SourceRecord;
import org.junit.jupiter.api.Test;

class ChangeMapperTest {
  @Test
  void should_write_numerics_nan_and_infinities_as_postgresql_does_and_leave_text_alone() {
    Schema numeric =
        SchemaBuilder.string().parameter(ChangeMapper.SOURCE_TYPE, "NUMERIC").optional().build();
    Schema text =
        SchemaBuilder.string().parameter(ChangeMapper.SOURCE_TYPE, "TEXT").optional().build();

    assertThat(ChangeMapper.numericSpecial(numeric, "NAN")).isEqualTo("NaN");
    assertThat(ChangeMapper.numericSpecial(numeric, "POSITIVE_INFINITY")).isEqualTo("Infinity");
    assertThat(ChangeMapper.numericSpecial(numeric, "NEGATIVE_INFINITY")).isEqualTo("-Infinity");
    assertThat(ChangeMapper.numericSpecial(numeric, "1.5")).isNull();
    assertThat(ChangeMapper.numericSpecial(text, "NAN")).as("a text column's own word").isNull();
    assertThat(ChangeMapper.numericSpecial(Schema.OPTIONAL_STRING_SCHEMA, "NAN")).isNull();
  }

  @Test
  void should_write_dates_as_iso_days_on_both_sides_of_the_epoch() {
    assertThat(ChangeMapper.isoText(Date.SCHEMA_NAME, 0)).isEqualTo("1970-01-01");
    assertThat(ChangeMapper.isoText(Date.SCHEMA_NAME, -1)).isEqualTo("1969-12-31");
    assertThat(ChangeMapper.isoText(Date.SCHEMA_NAME, 20_455)).isEqualTo("2026-01-02");
  }

  @Test
  void should_write_timestamps_with_only_the_fraction_they_have() {
    long micros = 1_767_323_045_500_000L; // 2026-01-02T03:04:05.5Z
    assertThat(ChangeMapper.isoText(MicroTimestamp.SCHEMA_NAME, micros))
        .isEqualTo("2026-01-02T03:04:05.5");
    assertThat(ChangeMapper.isoText(Timestamp.SCHEMA_NAME, micros / 1000))
        .isEqualTo("2026-01-02T03:04:05.5");
    assertThat(ChangeMapper.isoText(NanoTimestamp.SCHEMA_NAME, micros * 1000 + 7))
        .isEqualTo("2026-01-02T03:04:05.500000007");
    assertThat(ChangeMapper.isoText(MicroTimestamp.SCHEMA_NAME, 0L))
        .isEqualTo("1970-01-01T00:00:00");
  }

  @Test
  void should_count_a_timestamp_before_the_epoch_back_from_it() {
    assertThat(ChangeMapper.isoText(MicroTimestamp.SCHEMA_NAME, -1L))
        .isEqualTo("1969-12-31T23:59:59.999999");
    assertThat(ChangeMapper.isoText(Timestamp.SCHEMA_NAME, -500L))
        .isEqualTo("1969-12-31T23:59:59.5");
  }

  @Test
  void should_write_times_of_day_including_the_end_of_the_day() {
    assertThat(ChangeMapper.isoText(MicroTime.SCHEMA_NAME, 11_045_500_000L))
        .isEqualTo("03:04:05.5");
    assertThat(ChangeMapper.isoText(Time.SCHEMA_NAME, 11_045_000)).isEqualTo("03:04:05");
    assertThat(ChangeMapper.isoText(MicroTime.SCHEMA_NAME, 86_400_000_000L)).isEqualTo("24:00:00");
  }

  @Test
  void should_leave_other_types_alone() {
    assertThat(ChangeMapper.isoText(null, 5L)).isNull();
    assertThat(ChangeMapper.isoText("io.debezium.data.Json", 5L)).isNull();
    assertThat(ChangeMapper.isoText(ZonedTimestamp.SCHEMA_NAME, 5L)).isNull();
  }

  // The raw values below are those Debezium's capture handed on for rows PostgreSQL stored.

  @Test
  void should_write_dates_before_year_one_as_postgresql_does() {
    assertThat(ChangeMapper.isoText(Date.SCHEMA_NAME, -735_525)).isEqualTo("0045-03-15 BC");
    assertThat(ChangeMapper.isoText(MicroTimestamp.SCHEMA_NAME, -63_549_316_800_000_000L))
        .isEqualTo("0045-03-15T12:00:00 BC");
    assertThat(ChangeMapper.isoText(ZonedTimestamp.SCHEMA_NAME, "-0044-03-15T12:00:00.000000Z"))
        .isEqualTo("0045-03-15T12:00:00Z BC");
    assertThat(ChangeMapper.isoText(Date.SCHEMA_NAME, (int) LocalDate.of(0, 1, 1).toEpochDay()))
        .as("ISO year 0 is 1 BC")
        .isEqualTo("0001-01-01 BC");
  }

  @Test
  void should_write_years_past_9999_without_a_sign() {
    assertThat(
            ChangeMapper.isoText(Date.SCHEMA_NAME, (int) LocalDate.of(10_000, 1, 1).toEpochDay()))
        .isEqualTo("10000-01-01");
    assertThat(ChangeMapper.isoText(ZonedTimestamp.SCHEMA_NAME, "+10000-01-01T00:00:00.000000Z"))
        .isEqualTo("10000-01-01T00:00:00Z");
  }

  @Test
  void should_write_infinite_dates_and_timestamps_as_postgresql_does() {
    assertThat(ChangeMapper.isoText(Date.SCHEMA_NAME, -2_147_472_692)).isEqualTo("infinity");
    assertThat(ChangeMapper.isoText(Date.SCHEMA_NAME, -2_147_472_691)).isEqualTo("-infinity");
    assertThat(ChangeMapper.isoText(MicroTimestamp.SCHEMA_NAME, 9_223_372_036_825_200_000L))
        .isEqualTo("infinity");
    assertThat(ChangeMapper.isoText(MicroTimestamp.SCHEMA_NAME, -9_223_372_036_832_400_000L))
        .isEqualTo("-infinity");
    assertThat(ChangeMapper.isoText(ZonedTimestamp.SCHEMA_NAME, "infinity")).isEqualTo("infinity");
    assertThat(ChangeMapper.isoText(ZonedTimestamp.SCHEMA_NAME, "-infinity"))
        .isEqualTo("-infinity");
  }

  @Test
  void should_write_a_timestamptz_with_only_the_fraction_it_has() {
    assertThat(ChangeMapper.isoText(ZonedTimestamp.SCHEMA_NAME, "2026-01-02T03:04:05.000000Z"))
        .isEqualTo("2026-01-02T03:04:05Z");
    assertThat(ChangeMapper.isoText(ZonedTimestamp.SCHEMA_NAME, "2026-01-02T03:04:06.250000Z"))
        .isEqualTo("2026-01-02T03:04:06.25Z");
    assertThat(ChangeMapper.isoText(ZonedTimestamp.SCHEMA_NAME, "2026-01-02T03:04:07Z"))
        .isEqualTo("2026-01-02T03:04:07Z");
    assertThat(ChangeMapper.isoText(ZonedTimestamp.SCHEMA_NAME, "0999-01-02T03:04:05.100000Z"))
        .isEqualTo("0999-01-02T03:04:05.1Z");
  }

  @Test
  void should_pass_a_common_timestamptz_on_without_parsing_it() {
    // Years 1000 to 9999 in UTC take the text path: a value with nothing to trim is the same
    // string, which parsing and formatting again would not give.
    String full = "2026-01-02T03:04:05.123456Z";
    assertThat(ChangeMapper.isoText(ZonedTimestamp.SCHEMA_NAME, full)).isSameAs(full);
  }

  @Test
  void should_keep_every_timestamptz_instant_from_year_1_to_9999() {
    DateTimeFormatter debezium = DateTimeFormatter.ofPattern("uuuu-MM-dd'T'HH:mm:ss.SSSSSSX");
    Random random = new Random(42);
    long first = Instant.parse("0001-01-01T00:00:00Z").getEpochSecond();
    long last = Instant.parse("9999-12-31T23:59:59Z").getEpochSecond();
    for (int i = 0; i < 10_000; i++) {
      // A fifth with no fraction, a fifth whole milliseconds, the rest any microsecond.
      long micros =
          switch (i % 5) {
            case 0 -> 0;
            case 1 -> random.nextInt(1_000) * 1_000L;
            default -> random.nextInt(1_000_000);
          };
      OffsetDateTime t =
          Instant.ofEpochSecond(random.nextLong(first, last + 1), micros * 1_000)
              .atOffset(ZoneOffset.UTC);
      String text = debezium.format(t);

      String written = ChangeMapper.isoText(ZonedTimestamp.SCHEMA_NAME, text);

      assertThat(written)
          .as("written for %s", text)
          .matches("\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d(\\.\\d*[1-9])?Z");
      assertThat(OffsetDateTime.parse(written)).as("read back from %s", written).isEqualTo(t);
    }
  }

  @Test
  void should_map_a_row_by_each_column_s_logical_type() {
    Schema schema =
        SchemaBuilder.struct()
            .field("id", Schema.INT64_SCHEMA)
            .field("day", Date.builder().optional().build())
            .field("seen_at", MicroTimestamp.builder().optional().build())
            .field("note", Schema.OPTIONAL_STRING_SCHEMA)
            .build();
    Struct row =
        new Struct(schema)
            .put("id", 20_455L)
            .put("day", 20_455)
            .put("seen_at", 1_767_323_045_500_000L)
            .put("note", null);

    assertThat(ChangeMapper.columns(row))
        .containsExactly(
            org.assertj.core.api.Assertions.entry("id", 20_455L),
            org.assertj.core.api.Assertions.entry("day", "2026-01-02"),
            org.assertj.core.api.Assertions.entry("seen_at", "2026-01-02T03:04:05.5"),
            org.assertj.core.api.Assertions.entry("note", null));
  }

  @Test
  void should_write_arrays_as_postgresql_array_text() {
    Schema schema =
        SchemaBuilder.struct()
            .field("tags", SchemaBuilder.array(Schema.OPTIONAL_STRING_SCHEMA).optional().build())
            .field("nums", SchemaBuilder.array(Schema.OPTIONAL_INT32_SCHEMA).optional().build())
            .field(
                "days", SchemaBuilder.array(Date.builder().optional().build()).optional().build())
            .field("blobs", SchemaBuilder.array(Schema.OPTIONAL_BYTES_SCHEMA).optional().build())
            .field("none", SchemaBuilder.array(Schema.OPTIONAL_INT32_SCHEMA).optional().build())
            .build();
    Struct row =
        new Struct(schema)
            .put(
                "tags",
                java.util.Arrays.asList(
                    "plain", "a, b", "say \"hi\"", "back\\slash", "", "null", null, "{x}"))
            .put("nums", List.of(1, -2, 3))
            .put("days", List.of(20_455, -719_528))
            .put("blobs", List.of(ByteBuffer.wrap(new byte[] {0, (byte) 0xff})))
            .put("none", List.of());

    assertThat(ChangeMapper.columns(row))
        .containsExactly(
            org.assertj.core.api.Assertions.entry(
                "tags",
                "{plain,\"a, b\",\"say \\\"hi\\\"\",\"back\\\\slash\",\"\",\"null\",NULL,\"{x}\"}"),
            org.assertj.core.api.Assertions.entry("nums", "{1,-2,3}"),
            org.assertj.core.api.Assertions.entry("days", "{2026-01-02,\"0001-01-01 BC\"}"),
            org.assertj.core.api.Assertions.entry("blobs", "{\"\\\\x00ff\"}"),
            org.assertj.core.api.Assertions.entry("none", "{}"));
  }

  @Test
  void should_map_changes_of_tables_with_their_own_envelopes_and_skip_heartbeats() {
    TableName events = new TableName("public", "events");
    TableName parents = new TableName("app", "parents");
    ChangeMapper mapper =
        new ChangeMapper(
            "main",
            new CapturePlan(
                List.of(
                    new CaptureRoute("main", events, ChangeKind.INSERT, "t.events"),
                    new CaptureRoute("main", parents, ChangeKind.DELETE, "t.deleted"))),
            Clock.fixed(Instant.parse("2026-01-01T00:00:00Z"), ZoneOffset.UTC),
            "t.dlq");
    Schema withMicros =
        SchemaBuilder.struct()
            .field("schema", Schema.STRING_SCHEMA)
            .field("table", Schema.STRING_SCHEMA)
            .field("lsn", Schema.OPTIONAL_INT64_SCHEMA)
            .field("ts_ms", Schema.INT64_SCHEMA)
            .field("ts_us", Schema.OPTIONAL_INT64_SCHEMA)
            .field("txId", Schema.OPTIONAL_INT64_SCHEMA)
            .build();
    Schema millisOnly =
        SchemaBuilder.struct()
            .field("table", Schema.STRING_SCHEMA)
            .field("schema", Schema.STRING_SCHEMA)
            .field("ts_ms", Schema.INT64_SCHEMA)
            .build();
    Schema row = SchemaBuilder.struct().field("id", Schema.INT64_SCHEMA).build();
    Schema insertEnvelope =
        SchemaBuilder.struct()
            .field("after", row)
            .field("source", withMicros)
            .field("op", Schema.STRING_SCHEMA)
            .build();
    Schema deleteEnvelope =
        SchemaBuilder.struct()
            .field("op", Schema.STRING_SCHEMA)
            .field("source", millisOnly)
            .build();
    Schema heartbeat = SchemaBuilder.struct().field("ts_ms", Schema.INT64_SCHEMA).build();

    for (long i = 1; i <= 3; i++) { // the second and third take the remembered fields
      Struct insert =
          new Struct(insertEnvelope)
              .put("after", new Struct(row).put("id", i))
              .put("op", "c")
              .put(
                  "source",
                  new Struct(withMicros)
                      .put("schema", "public")
                      .put("table", "events")
                      .put("lsn", 100 + i)
                      .put("ts_ms", 5L)
                      .put("ts_us", 5_001L + i)
                      // The third with an epoch above the 32 bits pg_locks shows.
                      .put("txId", (i == 3 ? 5L << 32 : 0) + 700L + i));
      BufferEvent e =
          EventSerdes.decodeBufferEvent(
              mapper.map(record(insert, null)).orElseThrow().record().value());
      assertThat(e.table()).isEqualTo(events);
      assertThat(e.row()).containsEntry("id", i);
      assertThat(e.lsn()).isEqualTo(100 + i);
      assertThat(e.commitTimeMicros()).isEqualTo(5_001L + i);
      assertThat(e.txId()).isEqualTo(700L + i);

      Struct delete =
          new Struct(deleteEnvelope)
              .put("op", "d")
              .put(
                  "source",
                  new Struct(millisOnly)
                      .put("schema", "app")
                      .put("table", "parents")
                      .put("ts_ms", 7L));
      Struct key = new Struct(row).put("id", 10 * i);
      ChangeMapper.Mapped deleted = mapper.map(record(delete, key)).orElseThrow();
      DeletedRecord d = EventSerdes.decodeDeletedRecord(deleted.record().value());
      assertThat(deleted.record().topic()).isEqualTo("t.deleted");
      assertThat(d.table()).isEqualTo(parents);
      assertThat(d.key()).containsEntry("id", 10 * i);
      assertThat(d.lsn()).isZero();
      assertThat(d.commitTimeMicros()).isEqualTo(7_000L);
      assertThat(d.txId()).as("a source block without one").isZero();

      assertThat(mapper.map(record(new Struct(heartbeat).put("ts_ms", 1L), null))).isEmpty();
    }
    Schema deleteWithMicros =
        SchemaBuilder.struct()
            .field("op", Schema.STRING_SCHEMA)
            .field("source", withMicros)
            .build();
    Struct delete =
        new Struct(deleteWithMicros)
            .put("op", "d")
            .put(
                "source",
                new Struct(withMicros)
                    .put("schema", "app")
                    .put("table", "parents")
                    .put("ts_ms", 5L)
                    .put("ts_us", 5_002L)
                    .put("txId", (5L << 32) + 901L));
    DeletedRecord d =
        EventSerdes.decodeDeletedRecord(
            mapper
                .map(record(delete, new Struct(row).put("id", 1L)))
                .orElseThrow()
                .record()
                .value());
    assertThat(d.txId()).as("the deleting transaction, as pg_locks shows it").isEqualTo(901L);
  }

  private static SourceRecord record(Struct value, Struct key) {
    return new SourceRecord(
        Map.of(),
        Map.of(),
        "topic",
        null,
        key == null ? null : key.schema(),
        key,
        value.schema(),
        value);
  }

  @Test
  void should_place_a_snapshot_read_by_its_key_apart_from_every_wal_position() {
    long one = ChangeMapper.readPosition(Map.of("id", 1L));
    assertThat(one).isNegative().isEqualTo(ChangeMapper.readPosition(Map.of("id", 1L)));
    assertThat(ChangeMapper.readPosition(Map.of("id", 2L))).isNegative().isNotEqualTo(one);
    assertThat(ChangeMapper.readPosition(Map.of("id", new byte[] {1})))
        .as("bytes by their content")
        .isEqualTo(ChangeMapper.readPosition(Map.of("id", new byte[] {1})));
  }
}
