package dev.spillway.capture;

import dev.spillway.event.BufferEvent;
import dev.spillway.event.DeletedRecord;
import dev.spillway.event.EventSerdes;
import dev.spillway.event.TableName;
import io.debezium.time.Date;
import io.debezium.time.MicroTime;
import io.debezium.time.MicroTimestamp;
import io.debezium.time.NanoTime;
import io.debezium.time.NanoTimestamp;
import io.debezium.time.Time;
import io.debezium.time.Timestamp;
import java.math.BigDecimal;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Clock;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.connect.data.Field;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.source.SourceRecord;

/**
 * Turns a Debezium change record into the Kafka record Spillway publishes, or nothing when the
 * change is not routed (heartbeats, deletes of buffer rows, tables captured for another kind).
 * Stateless and thread-safe.
 */
final class ChangeMapper {
  private final String database;
  private final CapturePlan plan;
  private final Clock clock;
  private final Map<TableName, byte[]> keys = new java.util.concurrent.ConcurrentHashMap<>();

  ChangeMapper(String database, CapturePlan plan, Clock clock) {
    this.database = database;
    this.plan = plan;
    this.clock = clock;
  }

  /** A captured change before serialization, for counting and routing. */
  record Mapped(CaptureRoute route, ProducerRecord<byte[], byte[]> record) {}

  Optional<Mapped> map(SourceRecord record) {
    if (!(record.value() instanceof Struct envelope) || envelope.schema().field("op") == null) {
      return Optional.empty(); // heartbeat or schema-change records
    }
    ChangeKind kind = ChangeKind.ofDebeziumOp(envelope.getString("op"));
    if (kind == null) {
      return Optional.empty();
    }
    Struct source = envelope.getStruct("source");
    TableName table = new TableName(source.getString("schema"), source.getString("table"));
    Optional<CaptureRoute> route = plan.route(database, table, kind);
    if (route.isEmpty()) {
      return Optional.empty();
    }
    long lsn = longOrZero(source, "lsn");
    long commitMicros = commitMicros(source);
    long now = clock.millis();
    byte[] key = keys.computeIfAbsent(table, t -> t.toString().getBytes(StandardCharsets.UTF_8));
    byte[] value =
        switch (kind) {
          case DELETE ->
              EventSerdes.encode(
                  new DeletedRecord(
                      database, table, columns((Struct) record.key()), commitMicros, lsn, now));
          case INSERT ->
              EventSerdes.encode(
                  new BufferEvent(
                      database,
                      table,
                      columns(envelope.getStruct("after")),
                      commitMicros,
                      lsn,
                      now));
        };
    return Optional.of(
        new Mapped(route.get(), new ProducerRecord<>(route.get().topic(), key, value)));
  }

  private static long commitMicros(Struct source) {
    if (source.schema().field("ts_us") != null && source.getInt64("ts_us") != null) {
      return source.getInt64("ts_us");
    }
    return source.getInt64("ts_ms") * 1000;
  }

  private static long longOrZero(Struct s, String field) {
    if (s.schema().field(field) == null) {
      return 0;
    }
    Long v = s.getInt64(field);
    return v == null ? 0 : v;
  }

  /**
   * Struct columns → event values: null, Boolean, Integer, Long, Float, Double, String, byte[].
   * Dates and times come as ISO-8601 text, which reads well in a handler's payload and which
   * PostgreSQL casts back to the column's type when a key is looked up.
   */
  static Map<String, Object> columns(Struct struct) {
    Map<String, Object> out = new LinkedHashMap<>();
    if (struct == null) {
      return out;
    }
    for (Field f : struct.schema().fields()) {
      Object v = struct.get(f);
      String time = v == null ? null : isoText(f.schema().name(), v);
      out.put(f.name(), time != null ? time : value(v));
    }
    return out;
  }

  private static final long NANOS_PER_DAY = 86_400_000_000_000L;

  /**
   * A date or time Debezium carries as a number since the epoch or midnight (adaptive time
   * precision), as ISO-8601 text; null for any other logical type. Types with a time zone and
   * intervals arrive as text already.
   */
  static String isoText(String logicalType, Object v) {
    if (logicalType == null || !(v instanceof Number n)) {
      return null;
    }
    long x = n.longValue();
    return switch (logicalType) {
      case Date.SCHEMA_NAME -> LocalDate.ofEpochDay(x).toString();
      case Time.SCHEMA_NAME -> timeOfDay(x * 1_000_000);
      case MicroTime.SCHEMA_NAME -> timeOfDay(x * 1_000);
      case NanoTime.SCHEMA_NAME -> timeOfDay(x);
      case Timestamp.SCHEMA_NAME -> dateTime(x, 1_000);
      case MicroTimestamp.SCHEMA_NAME -> dateTime(x, 1_000_000);
      case NanoTimestamp.SCHEMA_NAME -> dateTime(x, 1_000_000_000);
      default -> null;
    };
  }

  private static String timeOfDay(long nanos) {
    // PostgreSQL's time type allows 24:00:00, one past java.time's last nanosecond of the day.
    return nanos == NANOS_PER_DAY
        ? "24:00:00"
        : DateTimeFormatter.ISO_LOCAL_TIME.format(LocalTime.ofNanoOfDay(nanos));
  }

  private static String dateTime(long sinceEpoch, long perSecond) {
    long seconds = Math.floorDiv(sinceEpoch, perSecond);
    long nanos = Math.floorMod(sinceEpoch, perSecond) * (1_000_000_000 / perSecond);
    return DateTimeFormatter.ISO_LOCAL_DATE_TIME.format(
        LocalDateTime.ofEpochSecond(seconds, (int) nanos, ZoneOffset.UTC));
  }

  private static Object value(Object v) {
    if (v == null
        || v instanceof Boolean
        || v instanceof Integer
        || v instanceof Long
        || v instanceof Float
        || v instanceof Double
        || v instanceof String) {
      return v;
    }
    if (v instanceof Short s) {
      return s.intValue();
    }
    if (v instanceof Byte b) {
      return b.intValue();
    }
    if (v instanceof byte[] bytes) {
      return bytes;
    }
    if (v instanceof ByteBuffer buffer) {
      byte[] bytes = new byte[buffer.remaining()];
      buffer.duplicate().get(bytes);
      return bytes;
    }
    if (v instanceof BigDecimal d) {
      return d.toPlainString();
    }
    if (v instanceof java.util.Date d) {
      return d.getTime();
    }
    return v.toString();
  }
}
