package dev.spillway.sink;

import java.time.Clock;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.internals.RecordHeaders;

/**
 * Sends a batch elsewhere before its offset is committed: back to the end of the batches topic it
 * came from, to the delay topic (remembering that batches topic), or to the dead-letter topic. Each
 * send waits for Kafka's acknowledgement, so a committed offset always means the batch is done or
 * queued somewhere. Thread-safe.
 */
final class Requeuer {
  private final Producer<byte[], byte[]> producer;
  private final String delayedTopic;
  private final String deadLetterTopic;
  private final Clock clock;

  Requeuer(
      Producer<byte[], byte[]> producer, String delayedTopic, String deadLetterTopic, Clock clock) {
    this.producer = producer;
    this.delayedTopic = delayedTopic;
    this.deadLetterTopic = deadLetterTopic;
    this.clock = clock;
  }

  void requeue(SinkRecord r, int attempts) throws InterruptedException, ExecutionException {
    requeue(r, attempts, r.value());
  }

  /** Back to the end of its batches topic as {@code value}, say only what is left of it. */
  void requeue(SinkRecord r, int attempts, byte[] value)
      throws InterruptedException, ExecutionException {
    send(r.topic(), null, r.key(), value, withAttempts(r, attempts, 0));
  }

  void delay(SinkRecord r, int attempts, long consumeAfterMillis)
      throws InterruptedException, ExecutionException {
    delay(r, r.value(), withAttempts(r, attempts, 0), consumeAfterMillis);
  }

  /**
   * To the delay topic after a run gave up a lock wait: its attempts as they were, {@code
   * lockWaits} such runs in a row.
   */
  void delayForLock(SinkRecord r, int lockWaits, long consumeAfterMillis)
      throws InterruptedException, ExecutionException {
    delay(r, r.value(), withAttempts(r, r.attempts(), lockWaits), consumeAfterMillis);
  }

  /**
   * To the delay topic as {@code value} (the record's own, or what is left of it) from the head of
   * its partition, where it waited for a table at STOP: its attempts as they were, {@code why} in
   * its {@link SinkHeaders#STEPPED_ASIDE} header.
   */
  void stepAside(SinkRecord r, byte[] value, long consumeAfterMillis, String why)
      throws InterruptedException, ExecutionException {
    RecordHeaders h = withAttempts(r, r.attempts(), 0);
    h.add(SinkHeaders.STEPPED_ASIDE, SinkHeaders.text(why));
    delay(r, value, h, consumeAfterMillis);
  }

  private void delay(SinkRecord r, byte[] value, RecordHeaders h, long consumeAfterMillis)
      throws InterruptedException, ExecutionException {
    h.remove(SinkHeaders.CONSUME_AFTER)
        .add(SinkHeaders.CONSUME_AFTER, SinkHeaders.longValue(consumeAfterMillis));
    h.remove(SinkHeaders.BATCHES_TOPIC).add(SinkHeaders.BATCHES_TOPIC, SinkHeaders.text(r.topic()));
    send(delayedTopic, null, r.key(), value, h);
  }

  /**
   * The record's headers with these attempts, and lock waits in a row (none: no header), without
   * the reason of an earlier step aside.
   */
  private static RecordHeaders withAttempts(SinkRecord r, int attempts, int lockWaits) {
    RecordHeaders h = copy(r.headers());
    h.remove(SinkHeaders.ATTEMPTS).add(SinkHeaders.ATTEMPTS, SinkHeaders.intValue(attempts));
    h.remove(SinkHeaders.LOCK_WAITS);
    h.remove(SinkHeaders.STEPPED_ASIDE);
    if (lockWaits > 0) {
      h.add(SinkHeaders.LOCK_WAITS, SinkHeaders.intValue(lockWaits));
    }
    return h;
  }

  /**
   * @param value what to dead-letter, or null for the record's own value
   * @param headers set on the letter, each replacing one of its name the record had
   */
  void deadLetter(SinkRecord r, Throwable error, byte[] value, Map<String, byte[]> headers)
      throws InterruptedException, ExecutionException {
    RecordHeaders h = copy(r.headers());
    h.remove(SinkHeaders.STEPPED_ASIDE); // why it once waited, not why it failed
    headers.forEach((key, v) -> h.remove(key).add(key, v));
    long failedAt = clock.millis();
    SinkHeaders.addFailure(
        h, error.getClass().getName(), String.valueOf(error.getMessage()), r.position(), failedAt);
    h.remove(SinkHeaders.ATTEMPTS).add(SinkHeaders.ATTEMPTS, SinkHeaders.intValue(r.attempts()));
    // the record's time is when it failed, as the header says
    send(deadLetterTopic, failedAt, r.key(), value == null ? r.value() : value, h);
  }

  /** Sends and waits for Kafka's acknowledgement; a null {@code timestamp} is the send time. */
  private void send(String topic, Long timestamp, byte[] key, byte[] value, RecordHeaders headers)
      throws InterruptedException, ExecutionException {
    producer.send(new ProducerRecord<>(topic, null, timestamp, key, value, headers)).get();
  }

  private static RecordHeaders copy(Map<String, byte[]> headers) {
    RecordHeaders h = new RecordHeaders();
    headers.forEach(h::add);
    return h;
  }
}
