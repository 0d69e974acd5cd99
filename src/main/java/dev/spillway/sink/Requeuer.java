package dev.spillway.sink;

import java.time.Clock;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.internals.RecordHeaders;

/**
 * Sends a batch elsewhere before its offset is committed: back to the end of the batches topic, to
 * the delay topic, or to the dead-letter topic. Each send waits for Kafka's acknowledgement, so a
 * committed offset always means the batch is done or queued somewhere. Thread-safe.
 */
final class Requeuer {
  private final Producer<byte[], byte[]> producer;
  private final String batchesTopic;
  private final String delayedTopic;
  private final String deadLetterTopic;
  private final Clock clock;

  Requeuer(
      Producer<byte[], byte[]> producer,
      String batchesTopic,
      String delayedTopic,
      String deadLetterTopic,
      Clock clock) {
    this.producer = producer;
    this.batchesTopic = batchesTopic;
    this.delayedTopic = delayedTopic;
    this.deadLetterTopic = deadLetterTopic;
    this.clock = clock;
  }

  void requeue(SinkRecord r, int attempts) throws InterruptedException, ExecutionException {
    RecordHeaders h = copy(r.headers());
    h.remove(SinkHeaders.ATTEMPTS).add(SinkHeaders.ATTEMPTS, SinkHeaders.intValue(attempts));
    send(batchesTopic, r, h);
  }

  void delay(SinkRecord r, int attempts, long consumeAfterMillis)
      throws InterruptedException, ExecutionException {
    RecordHeaders h = copy(r.headers());
    h.remove(SinkHeaders.ATTEMPTS).add(SinkHeaders.ATTEMPTS, SinkHeaders.intValue(attempts));
    h.remove(SinkHeaders.CONSUME_AFTER)
        .add(SinkHeaders.CONSUME_AFTER, SinkHeaders.longValue(consumeAfterMillis));
    send(delayedTopic, r, h);
  }

  void deadLetter(SinkRecord r, Throwable error) throws InterruptedException, ExecutionException {
    RecordHeaders h = copy(r.headers());
    h.add(SinkHeaders.ERROR_CLASS, SinkHeaders.text(error.getClass().getName()));
    h.add(SinkHeaders.ERROR_MESSAGE, SinkHeaders.text(String.valueOf(error.getMessage())));
    h.remove(SinkHeaders.ATTEMPTS).add(SinkHeaders.ATTEMPTS, SinkHeaders.intValue(r.attempts()));
    h.add(SinkHeaders.SOURCE, SinkHeaders.text(r.position()));
    h.add(SinkHeaders.FAILED_AT, SinkHeaders.longValue(clock.millis()));
    send(deadLetterTopic, r, h);
  }

  private void send(String topic, SinkRecord r, RecordHeaders headers)
      throws InterruptedException, ExecutionException {
    producer.send(new ProducerRecord<>(topic, null, r.key(), r.value(), headers)).get();
  }

  private static RecordHeaders copy(Map<String, byte[]> headers) {
    RecordHeaders h = new RecordHeaders();
    headers.forEach(h::add);
    return h;
  }
}
