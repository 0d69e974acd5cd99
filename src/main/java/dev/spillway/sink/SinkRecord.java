package dev.spillway.sink;

import java.util.Map;

/**
 * A batch as a sink worker received it.
 *
 * @param key may be null
 * @param value the pipeline's encoded batch; may be malformed
 * @param attempts runs that ended with a limit reached before this delivery (0 the first time)
 * @param headers every header, last value wins
 */
public record SinkRecord(
    String topic,
    int partition,
    long offset,
    byte[] key,
    byte[] value,
    int attempts,
    Map<String, byte[]> headers) {

  /** Where the record came from, for logs and dead letters. */
  public String position() {
    return SinkHeaders.position(topic, partition, offset);
  }
}
