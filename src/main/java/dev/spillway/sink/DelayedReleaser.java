package dev.spillway.sink;

import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.NavigableSet;
import java.util.PriorityQueue;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.function.BiFunction;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.InvalidRecordException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InvalidTopicException;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.errors.TopicAuthorizationException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Returns delayed batches to the batches topic they came from once their consume-after time has
 * come, each on its own time: a batch delayed a second for a lock is not held back by one delayed
 * ten minutes ahead of it on the same partition.
 *
 * <p>It reads the delay topic as it fills and keeps what is not yet due in memory, up to {@code
 * holdBytes}; beyond that it stops reading until released batches make room, and later ones wait in
 * Kafka. A partition's committed offset is that of its first batch not yet released, so a restart
 * or a move of the partition reads every unreleased batch again; the batches after it already
 * released are named in the commit's metadata and not released twice. At most {@link #NAMED_MAX}
 * are named per partition: past that the partition's later batches wait, in memory or in Kafka,
 * until the batch holding its commit back is released.
 *
 * <p>Driven by {@link #runOnce()} from one thread; time comes from the injected clock.
 */
final class DelayedReleaser implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(DelayedReleaser.class);

  /** What it keeps in memory by default before it stops reading the delay topic. */
  static final long DEFAULT_HOLD_BYTES = 64L * 1024 * 1024;

  /**
   * Batches a partition may have released past its committed offset: all of them fit in the
   * commit's metadata while they lie within 36<sup>4</sup> offsets of it.
   */
  static final int NAMED_MAX = 500;

  private final Consumer<byte[], byte[]> consumer;
  private final Producer<byte[], byte[]> producer;
  private final String delayedTopic;
  private final List<String> batchesTopics; // the first for batches without a return address
  private final TopicCheck topicExists;

  /** Other instances' batches topics Kafka was seen to have, and when (the clock's millis). */
  private final Map<String, Long> seenToExist = new HashMap<>();

  /** How long a topic seen to exist is taken to exist without asking Kafka again. */
  static final Duration SEEN_TO_EXIST = Duration.ofMinutes(1);

  private final String deadLetterTopic;

  /** What the pipeline adds to a dead letter's headers ({@link BatchHandler#deadLetterHeaders}). */
  private final BiFunction<SinkRecord, Throwable, Map<String, byte[]>> letterHeaders;

  /** Whether Kafka has a topic, asked without creating it. */
  @FunctionalInterface
  interface TopicCheck {
    boolean exists(String topic) throws InterruptedException;
  }

  private final Clock clock;
  private final Duration pollTimeout;
  private final long holdBytes;
  private final Map<TopicPartition, Held> held = new HashMap<>();
  // Every held batch by due time, so a turn looks only at those due.
  private final PriorityQueue<Waiting> byDue =
      new PriorityQueue<>(Comparator.comparingLong(Waiting::due));
  private long heldBytes;
  private volatile int waiting;
  private volatile long released;
  private volatile long loops;

  DelayedReleaser(
      Consumer<byte[], byte[]> consumer,
      Producer<byte[], byte[]> producer,
      String delayedTopic,
      List<String> batchesTopics,
      TopicCheck topicExists,
      String deadLetterTopic,
      BiFunction<SinkRecord, Throwable, Map<String, byte[]>> letterHeaders,
      Clock clock,
      Duration pollTimeout,
      long holdBytes) {
    this.letterHeaders = letterHeaders;
    this.consumer = consumer;
    this.producer = producer;
    this.delayedTopic = delayedTopic;
    this.batchesTopics = List.copyOf(batchesTopics);
    this.topicExists = topicExists;
    this.deadLetterTopic = deadLetterTopic;
    this.clock = clock;
    this.pollTimeout = pollTimeout;
    this.holdBytes = holdBytes;
    consumer.subscribe(List.of(delayedTopic), new Forget());
  }

  /** One partition's batches read and not yet released, and those released past its commit. */
  private static final class Held {
    final TreeMap<Long, Waiting> waiting = new TreeMap<>();
    final NavigableSet<Long> released;
    long next; // the offset after the last one read
    OffsetAndMetadata committed;

    Held(OffsetAndMetadata committed) {
      this.committed = committed;
      this.released = ReleasedPastCommit.offsets(committed);
    }
  }

  /** A batch read and not released, with its time and its share of {@code holdBytes}, read once. */
  private record Waiting(
      ConsumerRecord<byte[], byte[]> record, TopicPartition partition, long due, long size) {
    Waiting(ConsumerRecord<byte[], byte[]> record) {
      this(
          record,
          new TopicPartition(record.topic(), record.partition()),
          SinkHeaders.consumeAfter(record.headers()),
          DelayedReleaser.size(record));
    }

    long offset() {
      return record.offset();
    }
  }

  /**
   * A partition taken away: what was read of it is the new owner's to release, from the commit made
   * here first (a commit that failed during the rebalance is made now, or the new owner releases
   * again what was released since the last one Kafka took).
   */
  private final class Forget implements ConsumerRebalanceListener {
    @Override
    public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
      try {
        commit(partitions);
      } catch (RuntimeException e) {
        log.debug(
            "Could not commit delay partitions {} being taken away: {}", partitions, e.toString());
      }
      partitions.forEach(DelayedReleaser.this::forget);
    }

    @Override
    public void onPartitionsAssigned(Collection<TopicPartition> partitions) {}

    @Override
    public void onPartitionsLost(Collection<TopicPartition> partitions) {
      partitions.forEach(DelayedReleaser.this::forget);
    }
  }

  private void forget(TopicPartition tp) {
    Held h = held.remove(tp);
    if (h != null) {
      h.waiting.values().forEach(w -> heldBytes -= w.size());
      byDue.removeIf(w -> w.partition().equals(tp));
    }
  }

  /** Releases every due batch it holds, reading more first; returns how many it released. */
  int runOnce() throws InterruptedException, ExecutionException {
    Set<TopicPartition> stop = new HashSet<>();
    for (TopicPartition tp : consumer.assignment()) {
      Held h = held.get(tp);
      if (heldBytes >= holdBytes || (h != null && h.released.size() >= NAMED_MAX)) {
        stop.add(tp);
      }
    }
    Set<TopicPartition> go = new HashSet<>(consumer.paused());
    go.removeAll(stop);
    consumer.pause(stop);
    consumer.resume(go);
    take(consumer.poll(pollTimeout));
    return release(clock.millis());
  }

  private void take(ConsumerRecords<byte[], byte[]> records) {
    List<TopicPartition> partitions = new ArrayList<>(records.partitions());
    for (int i = 0; i < partitions.size(); i++) {
      TopicPartition tp = partitions.get(i);
      Held h;
      try {
        h = held.computeIfAbsent(tp, this::load);
      } catch (RuntimeException e) {
        // Nothing of what these partitions gave is held: read it again rather than pass over it.
        for (TopicPartition back : partitions.subList(i, partitions.size())) {
          if (consumer.assignment().contains(back)) {
            consumer.seek(back, records.records(back).get(0).offset());
          }
        }
        throw e;
      }
      for (ConsumerRecord<byte[], byte[]> r : records.records(tp)) {
        if (h.committed != null && r.offset() < h.committed.offset()) {
          h.released.clear(); // read from before the commit (offsets reset): its names are void
        }
        h.next = r.offset() + 1;
        if (!h.released.contains(r.offset())) {
          Waiting w = new Waiting(r);
          Waiting before = h.waiting.put(r.offset(), w);
          if (before != null) {
            heldBytes -= before.size(); // read again: its old entry in byDue is passed over
          }
          byDue.add(w);
          heldBytes += w.size();
        }
      }
    }
  }

  private Held load(TopicPartition tp) {
    return new Held(consumer.committed(Set.of(tp)).get(tp));
  }

  private int release(long now) throws InterruptedException, ExecutionException {
    Map<TopicPartition, List<Waiting>> due = new HashMap<>();
    while (!byDue.isEmpty() && byDue.peek().due() <= now) {
      Waiting w = byDue.poll();
      Held h = held.get(w.partition());
      if (h != null && h.waiting.get(w.offset()) == w) { // else forgotten or read again since
        due.computeIfAbsent(w.partition(), tp -> new ArrayList<>()).add(w);
      }
    }
    Map<Waiting, Future<RecordMetadata>> sends = new LinkedHashMap<>();
    List<Waiting> kept = new ArrayList<>(); // due, but not released this turn
    RuntimeException refused = null;
    for (Map.Entry<TopicPartition, List<Waiting>> d : due.entrySet()) {
      Held h = held.get(d.getKey());
      List<Waiting> batches = d.getValue();
      batches.sort(Comparator.comparingLong(Waiting::offset));
      // Due batches with none unreleased before them need no name: the commit moves past them.
      Iterator<Long> unreleased = h.waiting.keySet().iterator();
      boolean first = true;
      int room = NAMED_MAX - h.released.size(); // what the commit can still name
      for (Waiting w : batches) {
        first = first && unreleased.next() == w.offset();
        if (!first && room-- <= 0) {
          kept.add(w); // released once the batch ahead of it is
          continue;
        }
        try {
          sends.put(w, send(w.record()));
        } catch (RuntimeException e) {
          refused = refused == null ? e : refused; // still held: released at a later turn
          kept.add(w);
        }
      }
    }
    ExecutionException failed = null;
    int sent = 0;
    Map<Waiting, Future<RecordMetadata>> letters = new LinkedHashMap<>();
    for (Map.Entry<Waiting, Future<RecordMetadata>> s : sends.entrySet()) {
      Waiting w = s.getKey();
      try {
        s.getValue().get();
      } catch (ExecutionException e) {
        if (refusedForGood(e.getCause())) {
          try {
            letters.put(w, refusedForGood(w.record(), e.getCause()));
          } catch (RuntimeException f) {
            refused = refused == null ? f : refused; // still held: tried again at a later turn
            kept.add(w);
          }
        } else {
          failed = failed == null ? e : failed; // still held: released at a later turn
          kept.add(w);
        }
        continue;
      }
      sent += settle(w);
    }
    for (Map.Entry<Waiting, Future<RecordMetadata>> l : letters.entrySet()) {
      try {
        l.getValue().get();
      } catch (ExecutionException e) {
        failed = failed == null ? e : failed; // still held: tried again at a later turn
        kept.add(l.getKey());
        continue;
      }
      sent += settle(l.getKey());
    }
    byDue.addAll(kept);
    loops++;
    released += sent;
    waiting = held.values().stream().mapToInt(h -> h.waiting.size()).sum();
    if (sent > 0) {
      log.debug("Released {} delayed batches from {}", sent, delayedTopic);
    }
    RuntimeException uncommitted = null;
    try {
      commit(held.keySet());
    } catch (RuntimeException e) {
      uncommitted = e; // made again at the next turn, or when the partition is taken away
    }
    if (refused != null) {
      throw refused;
    }
    if (failed != null) {
      throw failed;
    }
    if (uncommitted != null) {
      throw uncommitted;
    }
    return sent;
  }

  /** A batch Kafka took, back or to the dead letters: no longer held. Returns 1, or 0 if forgot. */
  private int settle(Waiting w) {
    Held h = held.get(w.partition());
    if (h != null && h.waiting.remove(w.offset(), w)) {
      h.released.add(w.offset());
      heldBytes -= w.size();
      return 1;
    }
    return 0;
  }

  /**
   * Whether Kafka refused the batch itself, for good, on its topic: too large for it, not a record
   * it takes, or a topic this producer may no longer write to. A fault of the producer's or the
   * cluster's (a timeout, a sequence error, fencing) is no verdict on the batch: it is kept.
   */
  static boolean refusedForGood(Throwable refusal) {
    return refusal instanceof RecordTooLargeException
        || refusal instanceof InvalidRecordException
        || refusal instanceof InvalidTopicException
        || refusal instanceof TopicAuthorizationException;
  }

  /**
   * Sends to the dead letters a batch Kafka refused to take back for good (too large for the topic
   * now, say, or no longer allowed there): held, it would be refused every turn, and hold its
   * partition's commit and, past {@link #NAMED_MAX}, every batch behind it.
   */
  private Future<RecordMetadata> refusedForGood(ConsumerRecord<byte[], byte[]> r, Throwable why) {
    String to = returnAddress(r);
    log.warn(
        "Delayed batch {}-{}@{}: Kafka refused it back on {} ({}); it goes to the dead letters",
        r.topic(),
        r.partition(),
        r.offset(),
        to,
        why.toString());
    return deadLetter(
        r,
        to,
        why.getClass().getName(),
        "Kafka refused it back on " + to + ": " + why.getMessage());
  }

  /** Where a delayed batch returns to: the batches topic it names, or the first. */
  private String returnAddress(ConsumerRecord<byte[], byte[]> r) {
    String back = SinkHeaders.text(r.headers(), SinkHeaders.BATCHES_TOPIC);
    return back == null ? batchesTopics.get(0) : back;
  }

  /**
   * Sends the batch back to its batches topic, which another instance's configuration may have (one
   * with a buffer this one lacks, during a rolling change); to the dead letters when Kafka no
   * longer has that topic (its buffer taken out of the configuration, the topic deleted): sent
   * there, it would wait each turn for a topic that does not come, or create one no one reads.
   * Replayed once the topic is back, it runs.
   */
  private Future<RecordMetadata> send(ConsumerRecord<byte[], byte[]> r)
      throws InterruptedException {
    String to = returnAddress(r);
    if (batchesTopics.contains(to) || exists(to)) {
      return producer.send(new ProducerRecord<>(to, null, r.key(), r.value(), undelayed(r)));
    }
    String why =
        "it was delayed to return to "
            + to
            + ", a topic Kafka no longer has (its buffer left out of the configuration and the"
            + " topic deleted?)";
    log.warn(
        "Delayed batch {}-{}@{}: {}; it goes to the dead letters",
        r.topic(),
        r.partition(),
        r.offset(),
        why);
    return deadLetter(r, to, IllegalStateException.class.getName(), why);
  }

  /** The batch's headers without its consume-after time. */
  private static RecordHeaders undelayed(ConsumerRecord<byte[], byte[]> r) {
    RecordHeaders headers = new RecordHeaders(r.headers().toArray());
    headers.remove(SinkHeaders.CONSUME_AFTER);
    return headers;
  }

  /**
   * Sends the delayed batch to the dead letters, with the pipeline's headers, the reason, and the
   * batches topic {@code to} it was to return to, where a replay hands it.
   */
  private Future<RecordMetadata> deadLetter(
      ConsumerRecord<byte[], byte[]> r, String to, String errorClass, String why) {
    RecordHeaders headers = undelayed(r);
    headers.remove(SinkHeaders.BATCHES_TOPIC).add(SinkHeaders.BATCHES_TOPIC, SinkHeaders.text(to));
    long now = clock.millis();
    SinkRecord delayed =
        new SinkRecord(
            r.topic(),
            r.partition(),
            r.offset(),
            r.key(),
            r.value(),
            0,
            SinkHeaders.toMap(headers));
    letterHeaders
        .apply(delayed, new IllegalStateException(why))
        .forEach((key, v) -> headers.remove(key).add(key, v));
    SinkHeaders.addFailure(headers, errorClass, why, delayed.position(), now);
    return producer.send(
        new ProducerRecord<>(deadLetterTopic, null, now, r.key(), r.value(), headers));
  }

  /**
   * Whether Kafka has the topic, asked at most once a minute for one it has: a rolling change
   * adding a buffer can delay many of its batches, each asking through an admin client of its own.
   */
  private boolean exists(String topic) throws InterruptedException {
    long now = clock.millis();
    Long seen = seenToExist.get(topic);
    if (seen != null && now - seen < SEEN_TO_EXIST.toMillis()) {
      return true;
    }
    boolean exists = topicExists.exists(topic);
    if (exists) {
      seenToExist.put(topic, now);
    } else {
      seenToExist.remove(topic);
    }
    return exists;
  }

  /**
   * Commits these partitions up to each one's first batch not released, naming those released after
   * it.
   */
  private void commit(Collection<TopicPartition> partitions) {
    Map<TopicPartition, OffsetAndMetadata> commits = new HashMap<>();
    for (TopicPartition tp : partitions) {
      Held h = held.get(tp);
      if (h == null) {
        continue;
      }
      long offset = h.waiting.isEmpty() ? h.next : h.waiting.firstKey();
      h.released.headSet(offset, false).clear();
      String names = ReleasedPastCommit.metadata(offset, h.released);
      if (h.committed == null
          || h.committed.offset() != offset
          || !h.committed.metadata().equals(names)) {
        commits.put(tp, new OffsetAndMetadata(offset, names));
      }
    }
    if (!commits.isEmpty()) {
      consumer.commitSync(commits);
      commits.forEach((tp, c) -> held.get(tp).committed = c);
    }
  }

  private static long size(ConsumerRecord<byte[], byte[]> r) {
    long size = 64; // the record and its entry, roughly
    size += r.key() == null ? 0 : r.key().length;
    size += r.value() == null ? 0 : r.value().length;
    for (Header header : r.headers()) {
      size += header.key().length() + (header.value() == null ? 0 : header.value().length);
    }
    return size;
  }

  long released() {
    return released;
  }

  /** Delayed batches read and not yet released (not yet due, or their release failed). */
  int waiting() {
    return waiting;
  }

  long loops() {
    return loops;
  }

  /** Ends a call of the releaser's thread waiting on Kafka; {@link #runOnce} then throws. */
  void wakeup() {
    consumer.wakeup();
  }

  /** Closes the consumer: from the thread that runs it. */
  @Override
  public void close() {
    consumer.close(Duration.ofSeconds(5));
  }
}
