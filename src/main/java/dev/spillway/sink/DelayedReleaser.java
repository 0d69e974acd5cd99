package dev.spillway.sink;

import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Returns delayed batches to the batches topic they came from once their consume-after time has
 * come. Delayed records of a partition are in consume-after order (one delay setting), so a
 * partition whose head is not due yet is paused until it is, and nothing else waits on it: the sink
 * workers consume a different topic.
 *
 * <p>Driven by {@link #runOnce()} from one thread; time comes from the injected clock.
 */
final class DelayedReleaser implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(DelayedReleaser.class);

  private final Consumer<byte[], byte[]> consumer;
  private final Producer<byte[], byte[]> producer;
  private final String delayedTopic;
  private final String batchesTopic; // for batches delayed without a return address
  private final Clock clock;
  private final Duration pollTimeout;
  private final Map<TopicPartition, Long> dueAt = new HashMap<>();
  private volatile long released;
  private volatile long loops;

  DelayedReleaser(
      Consumer<byte[], byte[]> consumer,
      Producer<byte[], byte[]> producer,
      String delayedTopic,
      String batchesTopic,
      Clock clock,
      Duration pollTimeout) {
    this.consumer = consumer;
    this.producer = producer;
    this.delayedTopic = delayedTopic;
    this.batchesTopic = batchesTopic;
    this.clock = clock;
    this.pollTimeout = pollTimeout;
    consumer.subscribe(List.of(delayedTopic));
  }

  /** Releases every due batch it can see; returns how many it released. */
  int runOnce() throws InterruptedException, ExecutionException {
    long now = clock.millis();
    List<TopicPartition> wake = new ArrayList<>();
    dueAt.forEach(
        (tp, due) -> {
          if (due <= now) {
            wake.add(tp);
          }
        });
    if (!wake.isEmpty()) {
      wake.forEach(dueAt::remove);
      wake.retainAll(consumer.assignment());
      consumer.resume(wake);
    }
    ConsumerRecords<byte[], byte[]> records = consumer.poll(pollTimeout);
    boolean settled = false;
    try {
      int sent = release(records, now);
      settled = true;
      return sent;
    } finally {
      if (!settled) {
        // The position is already past what was polled; without going back, the next commit of
        // this partition would pass over a batch whose release failed, and it would never run.
        for (TopicPartition tp : records.partitions()) {
          if (consumer.assignment().contains(tp)) {
            consumer.seek(tp, records.records(tp).get(0).offset());
          }
        }
      }
    }
  }

  private int release(ConsumerRecords<byte[], byte[]> records, long now)
      throws InterruptedException, ExecutionException {
    Map<TopicPartition, OffsetAndMetadata> commits = new HashMap<>();
    List<Future<RecordMetadata>> sends = new ArrayList<>();
    for (TopicPartition tp : records.partitions()) {
      for (ConsumerRecord<byte[], byte[]> r : records.records(tp)) {
        long due = SinkHeaders.consumeAfter(r.headers());
        if (due > now) {
          consumer.seek(tp, r.offset());
          consumer.pause(List.of(tp));
          dueAt.put(tp, due);
          break;
        }
        RecordHeaders headers = new RecordHeaders(r.headers().toArray());
        headers.remove(SinkHeaders.CONSUME_AFTER);
        String back = SinkHeaders.text(r.headers(), SinkHeaders.BATCHES_TOPIC);
        sends.add(
            producer.send(
                new ProducerRecord<>(
                    back == null ? batchesTopic : back, null, r.key(), r.value(), headers)));
        commits.put(tp, new OffsetAndMetadata(r.offset() + 1));
      }
    }
    for (Future<RecordMetadata> f : sends) {
      f.get();
    }
    loops++;
    if (!commits.isEmpty()) {
      consumer.commitSync(commits);
      released += sends.size();
      log.debug("Released {} delayed batches from {}", sends.size(), delayedTopic);
    }
    return sends.size();
  }

  long released() {
    return released;
  }

  long loops() {
    return loops;
  }

  @Override
  public void close() {
    consumer.close(Duration.ofSeconds(5));
  }
}
