package dev.spillway.event;

import java.nio.ByteBuffer;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

/** Column maps as events carry them: insertion-ordered, unmodifiable, nulls allowed. */
final class Columns {
  private Columns() {}

  static Map<String, Object> copy(Map<String, Object> columns) {
    if (columns == null) {
      throw new NullPointerException("columns");
    }
    return Collections.unmodifiableMap(new LinkedHashMap<>(columns));
  }

  /** Avro map values → event values; Avro strings may arrive as Utf8 and bytes as ByteBuffer. */
  static Map<String, Object> fromAvro(Map<String, Object> avro) {
    Map<String, Object> out = new LinkedHashMap<>();
    avro.forEach((k, v) -> out.put(k.toString(), fromAvroValue(v)));
    return out;
  }

  static Map<String, Object> toAvro(Map<String, Object> columns) {
    boolean hasBytes = false;
    for (Object v : columns.values()) {
      hasBytes |= v instanceof byte[];
    }
    if (!hasBytes) {
      return columns; // the common case: nothing to convert, no copy
    }
    Map<String, Object> out = new LinkedHashMap<>();
    columns.forEach((k, v) -> out.put(k, v instanceof byte[] b ? ByteBuffer.wrap(b) : v));
    return out;
  }

  private static Object fromAvroValue(Object v) {
    if (v instanceof CharSequence s) {
      return s.toString();
    }
    if (v instanceof ByteBuffer b) {
      byte[] bytes = new byte[b.remaining()];
      b.duplicate().get(bytes);
      return bytes;
    }
    return v;
  }
}
