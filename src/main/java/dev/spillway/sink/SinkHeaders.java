package dev.spillway.sink;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.OptionalLong;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.Headers;

/** The headers the sink adds to records it re-enqueues, delays or dead-letters. */
public final class SinkHeaders {
  private SinkHeaders() {}

  /** Runs that ended with a limit reached (cleanup attempts). */
  public static final String ATTEMPTS = "spillway.attempts";

  /**
   * Runs in a row that gave up a lock wait at the database's lock timeout; any other ending of a
   * run that puts the batch back clears it.
   */
  public static final String LOCK_WAITS = "spillway.lock-waits";

  /**
   * On a batch sent to the delay topic because it waited at the head of its partition for a table
   * at STOP, batches behind it waiting too: why (the table and its state's reason). Any other
   * ending of a run that puts the batch back clears it.
   */
  public static final String STEPPED_ASIDE = "spillway.stepped-aside";

  /** Epoch milliseconds before which a delayed batch must not run. */
  public static final String CONSUME_AFTER = "spillway.consume-after";

  /** The batches topic a delayed batch returns to once due. */
  public static final String BATCHES_TOPIC = "spillway.batches-topic";

  public static final String ERROR_CLASS = "spillway.error.class";
  public static final String ERROR_MESSAGE = "spillway.error.message";

  /** topic-partition@offset the record was read from when it failed. */
  public static final String SOURCE = "spillway.source";

  public static final String FAILED_AT = "spillway.failed-at";

  /**
   * On a batch handed over again from the dead-letter topic: the dead letter's
   * topic-partition@offset.
   */
  public static final String REPLAYED_FROM = "spillway.replayed-from";

  /**
   * What a batch's earlier runs left in its headers: its attempts, delay and failure. A replayed
   * batch starts without them.
   */
  public static final java.util.Set<String> RUN_STATE =
      java.util.Set.of(
          ATTEMPTS,
          LOCK_WAITS,
          STEPPED_ASIDE,
          CONSUME_AFTER,
          BATCHES_TOPIC,
          ERROR_CLASS,
          ERROR_MESSAGE,
          SOURCE,
          FAILED_AT);

  static Map<String, byte[]> toMap(Headers headers) {
    Map<String, byte[]> out = new LinkedHashMap<>();
    for (Header h : headers) {
      out.put(h.key(), h.value());
    }
    return out;
  }

  static String text(Headers headers, String key) {
    Header h = headers.lastHeader(key);
    return h == null ? null : text(h.value());
  }

  static int attempts(Map<String, byte[]> headers) {
    return intHeader(headers, ATTEMPTS);
  }

  static int lockWaits(Map<String, byte[]> headers) {
    return intHeader(headers, LOCK_WAITS);
  }

  private static int intHeader(Map<String, byte[]> headers, String key) {
    byte[] v = headers.get(key);
    return v == null || v.length != Integer.BYTES ? 0 : ByteBuffer.wrap(v).getInt();
  }

  static long consumeAfter(Headers headers) {
    Header h = headers.lastHeader(CONSUME_AFTER);
    return h == null || h.value().length != Long.BYTES ? 0 : ByteBuffer.wrap(h.value()).getLong();
  }

  static byte[] intValue(int v) {
    return ByteBuffer.allocate(Integer.BYTES).putInt(v).array();
  }

  static byte[] longValue(long v) {
    return ByteBuffer.allocate(Long.BYTES).putLong(v).array();
  }

  /**
   * The most of a failure's message a dead letter keeps, in UTF-8 bytes: a handler's reason or a
   * database's error may be long, and a letter Kafka refuses as too large is never written.
   */
  static final int MESSAGE_KEPT_BYTES = 8 * 1024;

  /** The headers every dead letter carries: why it failed, where it was read and when. */
  public static void addFailure(
      Headers headers, String errorClass, String message, String source, long failedAtMillis) {
    headers.add(ERROR_CLASS, text(errorClass));
    headers.add(ERROR_MESSAGE, text(cut(message)));
    headers.add(SOURCE, text(source));
    setFailedAt(headers, failedAtMillis);
  }

  /** The message, or its first {@link #MESSAGE_KEPT_BYTES} saying it was cut, whole characters. */
  static String cut(String message) {
    byte[] bytes = message.getBytes(StandardCharsets.UTF_8);
    if (bytes.length <= MESSAGE_KEPT_BYTES) {
      return message;
    }
    String tail = " … (cut; " + bytes.length + " bytes in all)";
    int end = MESSAGE_KEPT_BYTES - tail.getBytes(StandardCharsets.UTF_8).length;
    while ((bytes[end] & 0xC0) == 0x80) { // not within a character's bytes
      end--;
    }
    return new String(bytes, 0, end, StandardCharsets.UTF_8) + tail;
  }

  /** Sets {@link #FAILED_AT}, in epoch milliseconds, replacing any there. */
  public static void setFailedAt(Headers headers, long failedAtMillis) {
    headers.remove(FAILED_AT).add(FAILED_AT, longValue(failedAtMillis));
  }

  /** When a dead letter was written, in epoch milliseconds; empty when it does not say. */
  public static OptionalLong failedAt(Headers headers) {
    Header h = headers.lastHeader(FAILED_AT);
    return h == null || h.value() == null || h.value().length != Long.BYTES
        ? OptionalLong.empty()
        : OptionalLong.of(ByteBuffer.wrap(h.value()).getLong());
  }

  /** Where a record was read from, as dead letters and logs name it: topic-partition@offset. */
  public static String position(String topic, int partition, long offset) {
    return topic + "-" + partition + "@" + offset;
  }

  /** Text as a header value; null as empty. */
  public static byte[] text(String s) {
    return (s == null ? "" : s).getBytes(StandardCharsets.UTF_8);
  }

  /** A header value as text, for tools that show dead letters. */
  public static String text(byte[] value) {
    return value == null ? null : new String(value, StandardCharsets.UTF_8);
  }
}
