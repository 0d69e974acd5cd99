package dev.spillway.capture;

import dev.spillway.event.BufferEvent;
import dev.spillway.event.DeletedRecord;
import dev.spillway.event.EventSerdes;
import dev.spillway.event.KafkaClients;
import dev.spillway.event.TableName;
import dev.spillway.event.ValueText;
import dev.spillway.sink.SinkHeaders;
import io.debezium.connector.postgresql.PostgresValueConverter;
import io.debezium.time.Date;
import io.debezium.time.MicroTime;
import io.debezium.time.MicroTimestamp;
import io.debezium.time.NanoTime;
import io.debezium.time.NanoTimestamp;
import io.debezium.time.Time;
import io.debezium.time.Timestamp;
import io.debezium.time.ZonedTimestamp;
import java.math.BigDecimal;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Clock;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.time.format.DateTimeFormatterBuilder;
import java.time.format.DateTimeParseException;
import java.time.format.SignStyle;
import java.time.temporal.ChronoField;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.UUID;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.connect.data.Field;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.source.SourceRecord;

/**
 * Turns a Debezium change record into the Kafka record Spillway publishes, or nothing when the
 * change is not routed (heartbeats, deletes of buffer rows, tables captured for another kind).
 * Thread-safe; it remembers, per envelope schema, where the fields every change reads are.
 */
final class ChangeMapper {
  private static final org.slf4j.Logger log = org.slf4j.LoggerFactory.getLogger(ChangeMapper.class);

  /** Debezium's {@code op} for a row a snapshot read. */
  private static final String SNAPSHOT_READ = "r";

  private final String database;
  private final CapturePlan plan;
  private final Clock clock;
  private final String insertsDeadLetters;
  private final Map<TableName, byte[]> keys = new java.util.concurrent.ConcurrentHashMap<>();

  /**
   * Per envelope schema (one per captured table, until its columns change), by identity: a field
   * looked up by name costs a hash look-up per read, which a profile showed on every change.
   */
  private volatile Map<Schema, EnvelopeFields> envelopes = new IdentityHashMap<>();

  /** Past this many envelope schemas (tables altered again and again), the memory starts over. */
  private static final int MAX_ENVELOPES = 1_000;

  /**
   * @param insertsDeadLetters where an insert too large for one Kafka record goes instead: the
   *     buffers' dead-letter topic
   */
  ChangeMapper(String database, CapturePlan plan, Clock clock, String insertsDeadLetters) {
    this.database = database;
    this.plan = plan;
    this.clock = clock;
    this.insertsDeadLetters = insertsDeadLetters;
  }

  /** A captured change before serialization, for counting and routing. */
  record Mapped(CaptureRoute route, ProducerRecord<byte[], byte[]> record) {
    /** Whether it is the dead letter of a row too large for Kafka rather than the change. */
    boolean tooLarge() {
      return !record.topic().equals(route.topic());
    }
  }

  Optional<Mapped> map(SourceRecord record) {
    if (!(record.value() instanceof Struct envelope)) {
      return Optional.empty();
    }
    EnvelopeFields f = fields(envelope.schema());
    if (f == null) {
      return Optional.empty(); // heartbeat or schema-change records
    }
    String op = (String) envelope.get(f.op());
    ChangeKind kind = ChangeKind.ofDebeziumOp(op);
    if (kind == null) {
      return Optional.empty();
    }
    Struct source = (Struct) envelope.get(f.source());
    TableName table =
        new TableName((String) source.get(f.schema()), (String) source.get(f.table()));
    Optional<CaptureRoute> route = plan.route(database, table, kind);
    if (route.isEmpty()) {
      return Optional.empty();
    }
    boolean read = SNAPSHOT_READ.equals(op);
    Map<String, Object> readKey = read ? columns((Struct) record.key()) : null;
    long lsn =
        read ? readPosition(readKey) : f.lsn() == null ? 0 : orZero((Long) source.get(f.lsn()));
    long commitMicros = f.commitMicros(source);
    long now = clock.millis();
    byte[] key = keys.computeIfAbsent(table, t -> t.toString().getBytes(StandardCharsets.UTF_8));
    byte[] value =
        switch (kind) {
          case DELETE ->
              EventSerdes.encode(
                  new DeletedRecord(
                      database,
                      table,
                      columns((Struct) record.key()),
                      commitMicros,
                      lsn,
                      now,
                      f.txId(source)));
          case INSERT ->
              EventSerdes.encode(
                  new BufferEvent(
                      database,
                      table,
                      columns(f.after() == null ? null : (Struct) envelope.get(f.after())),
                      commitMicros,
                      lsn,
                      now,
                      read ? 0 : f.txId(source)));
        };
    if (value.length > KafkaClients.MAX_VALUE_BYTES) {
      return Optional.of(
          new Mapped(
              route.get(),
              tooLarge(
                  table,
                  read ? readKey : columns((Struct) record.key()),
                  value.length,
                  commitMicros,
                  lsn)));
    }
    return Optional.of(
        new Mapped(route.get(), new ProducerRecord<>(route.get().topic(), key, value)));
  }

  /**
   * The dead letter of an inserted row too large for one Kafka record: its key alone, with the
   * reason. Sending the row would fail capture of the whole database, again after every restart;
   * the row itself stays in its table.
   */
  private ProducerRecord<byte[], byte[]> tooLarge(
      TableName table, Map<String, Object> key, int bytes, long commitMicros, long lsn) {
    long now = clock.millis();
    RecordHeaders headers = new RecordHeaders();
    String why =
        String.format(
            "the row %s of %s is %,d bytes as an event, more than the %,d one Kafka record carries"
                + " here; it stays in the table: handle it outside Spillway, or make it smaller"
                + " and insert it anew",
            keyText(key), table.displayName(), bytes, KafkaClients.MAX_VALUE_BYTES);
    // Nothing else tells: its buffer counts no batch, and the row waits in the table for good.
    log.warn("Dead-lettered to {}: {}", insertsDeadLetters, why);
    SinkHeaders.addFailure(headers, "RowTooLarge", why, "capture of database " + database, now);
    byte[] value =
        EventSerdes.encode(new BufferEvent(database, table, key, commitMicros, lsn, now, 0));
    return new ProducerRecord<>(
        insertsDeadLetters,
        null,
        table.toString().getBytes(StandardCharsets.UTF_8),
        value,
        headers);
  }

  /** The fields of a change envelope's schema, or null when it is not one of a change. */
  private EnvelopeFields fields(Schema envelope) {
    Map<Schema, EnvelopeFields> known = envelopes;
    if (known.containsKey(envelope)) {
      return known.get(envelope);
    }
    EnvelopeFields f = EnvelopeFields.of(envelope);
    synchronized (this) {
      Map<Schema, EnvelopeFields> more =
          envelopes.size() < MAX_ENVELOPES
              ? new IdentityHashMap<>(envelopes)
              : new IdentityHashMap<>();
      more.put(envelope, f);
      envelopes = more;
    }
    return f;
  }

  /**
   * The position of a row a snapshot read. Reads of one chunk share their WAL position and time, so
   * batches of different rows would get the same group id from them; this one is derived from the
   * row's key instead, so the same row always has the same, and negative, which no WAL position is.
   */
  static long readPosition(Map<String, Object> key) {
    long h =
        UUID.nameUUIDFromBytes(keyText(key).getBytes(StandardCharsets.UTF_8))
            .getMostSignificantBits();
    return -1 - (h & Long.MAX_VALUE);
  }

  /** A row's key as text: {@code id=42}, columns in key order, values as PostgreSQL reads them. */
  private static String keyText(Map<String, Object> key) {
    StringBuilder b = new StringBuilder();
    key.forEach(
        (column, value) ->
            b.append(b.length() == 0 ? "" : ", ")
                .append(column)
                .append('=')
                .append(value == null ? "null" : ValueText.of(value)));
    return b.toString();
  }

  private static long orZero(Long v) {
    return v == null ? 0 : v;
  }

  /**
   * Where a change envelope holds what every change reads. Debezium's source block has {@code
   * ts_us} from 2.x on, only {@code ts_ms} before, and {@code txId}, the transaction's xid; {@code
   * after} is absent for deletes.
   */
  private record EnvelopeFields(
      Field op,
      Field source,
      Field after,
      Field schema,
      Field table,
      Field lsn,
      Field tsUs,
      Field tsMs,
      Field txId) {
    /** Null when the schema is not a change envelope's (no {@code op} or no source block). */
    static EnvelopeFields of(Schema envelope) {
      Field op = envelope.field("op");
      Field source = envelope.field("source");
      if (op == null || source == null) {
        return null;
      }
      Schema s = source.schema();
      return new EnvelopeFields(
          op,
          source,
          envelope.field("after"),
          s.field("schema"),
          s.field("table"),
          s.field("lsn"),
          s.field("ts_us"),
          s.field("ts_ms"),
          s.field("txId"));
    }

    /**
     * The transaction's id as {@code pg_locks} shows it (32 bits, without the epoch), 0 when the
     * source block has none.
     */
    long txId(Struct source) {
      return txId == null ? 0 : orZero((Long) source.get(txId)) & 0xFFFF_FFFFL;
    }

    long commitMicros(Struct source) {
      Long micros = tsUs == null ? null : (Long) source.get(tsUs);
      return micros != null ? micros : tsMs == null ? 0 : orZero((Long) source.get(tsMs)) * 1000;
    }
  }

  /**
   * Struct columns → event values: null, Boolean, Integer, Long, Float, Double, String, byte[].
   * Dates and times come as ISO-8601 text, which reads well in a handler's payload and which
   * PostgreSQL casts back to the column's type when a key is looked up; arrays as PostgreSQL's own
   * array text.
   */
  static Map<String, Object> columns(Struct struct) {
    Map<String, Object> out = new LinkedHashMap<>();
    if (struct == null) {
      return out;
    }
    for (Field f : struct.schema().fields()) {
      out.put(f.name(), column(f.schema(), struct.get(f)));
    }
    return out;
  }

  private static Object column(Schema schema, Object v) {
    if (v == null) {
      return null;
    }
    if (v instanceof List<?> elements && schema.type() == Schema.Type.ARRAY) {
      return arrayText(schema.valueSchema(), elements);
    }
    String time = isoText(schema.name(), v);
    if (time != null) {
      return time;
    }
    if (v instanceof String text) {
      String special = numericSpecial(schema, text);
      if (special != null) {
        return special;
      }
    }
    return value(v);
  }

  /** The schema parameter in which Debezium gives a column's PostgreSQL type. */
  static final String SOURCE_TYPE = "__debezium.source.column.type";

  /**
   * A numeric {@code NaN}, {@code Infinity} or {@code -Infinity} as PostgreSQL writes it, when
   * Debezium gave it as its own word ({@code NAN}, {@code POSITIVE_INFINITY}, {@code
   * NEGATIVE_INFINITY}) for a numeric column; null for any other value.
   */
  static String numericSpecial(Schema schema, String text) {
    if (text.length() != 3 && text.length() != 17) {
      return null; // neither word: no hash of a long text computed for the switch
    }
    String special =
        switch (text) {
          case "NAN" -> "NaN";
          case "POSITIVE_INFINITY" -> "Infinity";
          case "NEGATIVE_INFINITY" -> "-Infinity";
          default -> null;
        };
    if (special == null || schema.parameters() == null) {
      return null;
    }
    String type = schema.parameters().get(SOURCE_TYPE);
    return "NUMERIC".equalsIgnoreCase(type) || "DECIMAL".equalsIgnoreCase(type) ? special : null;
  }

  /**
   * An array as PostgreSQL writes one, {@code {1,2,NULL}} or {@code {"a, b","say \"hi\""}}, so it
   * reads it back; a list's own text would lose which commas part the elements. Elements are
   * written as columns are (dates and times as ISO-8601 text, bytea in hex), quoted where needed.
   */
  static String arrayText(Schema element, List<?> elements) {
    StringBuilder out = new StringBuilder("{");
    for (int i = 0; i < elements.size(); i++) {
      if (i > 0) {
        out.append(',');
      }
      Object v = column(element, elements.get(i));
      if (v == null) {
        out.append("NULL");
        continue;
      }
      String text = ValueText.of(v);
      if (elements.get(i) instanceof List<?> || !needsQuotes(text)) {
        out.append(text); // a nested array, or a plain element
      } else {
        ValueText.appendQuoted(out, text);
      }
    }
    return out.append('}').toString();
  }

  /** Whether PostgreSQL's array text must quote this element, as it does when writing one. */
  private static boolean needsQuotes(String text) {
    if (text.isEmpty() || text.equalsIgnoreCase("NULL")) {
      return true;
    }
    for (int k = 0; k < text.length(); k++) {
      char ch = text.charAt(k);
      if (ch == '"'
          || ch == '\\'
          || ch == '{'
          || ch == '}'
          || ch == ','
          || Character.isWhitespace(ch)) {
        return true;
      }
    }
    return false;
  }

  private static final long NANOS_PER_DAY = 86_400_000_000_000L;

  /** Years as PostgreSQL reads them: never signed, four digits at least, BC added by the caller. */
  private static final DateTimeFormatter DATE =
      new DateTimeFormatterBuilder()
          .appendValue(ChronoField.YEAR_OF_ERA, 4, 10, SignStyle.NOT_NEGATIVE)
          .appendLiteral('-')
          .appendValue(ChronoField.MONTH_OF_YEAR, 2)
          .appendLiteral('-')
          .appendValue(ChronoField.DAY_OF_MONTH, 2)
          .toFormatter();

  private static final DateTimeFormatter DATE_TIME =
      new DateTimeFormatterBuilder()
          .append(DATE)
          .appendLiteral('T')
          .append(DateTimeFormatter.ISO_LOCAL_TIME)
          .toFormatter();

  private static final DateTimeFormatter DATE_TIME_OFFSET =
      new DateTimeFormatterBuilder().append(DATE_TIME).appendOffsetId().toFormatter();

  /**
   * A date or time Debezium carries as a number since the epoch or midnight (adaptive time
   * precision), or a {@code timestamptz} it carries as text, as ISO-8601 text that PostgreSQL also
   * reads; null for any other logical type. Dates before year 1 end in {@code BC} and the infinite
   * values are {@code infinity} and {@code -infinity}, as PostgreSQL writes them. Intervals and
   * other types with a time zone arrive as text already.
   */
  static String isoText(String logicalType, Object v) {
    if (ZonedTimestamp.SCHEMA_NAME.equals(logicalType) && v instanceof String text) {
      return zonedDateTime(text);
    }
    if (logicalType == null || !(v instanceof Number n)) {
      return null;
    }
    long x = n.longValue();
    return switch (logicalType) {
      case Date.SCHEMA_NAME -> date(LocalDate.ofEpochDay(x));
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

  private static String date(LocalDate d) {
    // Debezium carries PostgreSQL's infinite dates as two dates far outside its range.
    if (d.equals(PostgresValueConverter.POSITIVE_INFINITY_LOCAL_DATE)) {
      return "infinity";
    }
    if (d.equals(PostgresValueConverter.NEGATIVE_INFINITY_LOCAL_DATE)) {
      return "-infinity";
    }
    return era(DATE.format(d), d.getYear());
  }

  private static String dateTime(long sinceEpoch, long perSecond) {
    long seconds = Math.floorDiv(sinceEpoch, perSecond);
    long nanos = Math.floorMod(sinceEpoch, perSecond) * (1_000_000_000 / perSecond);
    Instant t = Instant.ofEpochSecond(seconds, nanos);
    if (t.equals(PostgresValueConverter.POSITIVE_INFINITY_INSTANT)) {
      return "infinity";
    }
    if (t.equals(PostgresValueConverter.NEGATIVE_INFINITY_INSTANT)) {
      return "-infinity";
    }
    LocalDateTime local = LocalDateTime.ofInstant(t, ZoneOffset.UTC);
    return era(DATE_TIME.format(local), local.getYear());
  }

  /** Debezium's {@code timestamptz} text (always six fraction digits, signed years) re-written. */
  private static String zonedDateTime(String text) {
    // On the capture path for every timestamptz value, so the common form (years 1000 to 9999
    // AD, UTC) only loses its fraction's trailing zeros, without being parsed and formatted.
    int n = text.length();
    if (n >= 20
        && text.charAt(n - 1) == 'Z'
        && text.charAt(0) >= '1'
        && text.charAt(0) <= '9'
        && text.charAt(4) == '-'
        && text.charAt(10) == 'T') {
      int end = n - 1;
      while (end > 19 && text.charAt(end - 1) == '0') {
        end--;
      }
      if (end == 20) {
        end = 19; // no fraction left: drop its dot too
      }
      return end == n - 1 ? text : text.substring(0, end) + 'Z';
    }
    try {
      OffsetDateTime t = OffsetDateTime.parse(text);
      return era(DATE_TIME_OFFSET.format(t), t.getYear());
    } catch (DateTimeParseException e) {
      return text; // infinity and -infinity, which PostgreSQL reads as they are
    }
  }

  private static String era(String text, int year) {
    return year > 0 ? text : text + " BC";
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
