package dev.spillway.ops;

import dev.spillway.event.KafkaClients;
import dev.spillway.event.TopicProvisioner;
import dev.spillway.event.TopicRange;
import dev.spillway.event.Topics;
import dev.spillway.sink.SinkHeaders;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Function;
import java.util.function.Predicate;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;

/**
 * Hands a pipeline's dead-lettered batches over again. A dead letter that a sink worker wrote for a
 * batch (its {@code spillway.source} is one of the pipeline's batches topics) goes back to that
 * topic with its key and value, without the headers of its failed runs and with {@code
 * spillway.replayed-from}; the workers then run it as a new batch. Dead letters of records that
 * never became a batch (a captured change that did not decode, say) are listed and left. The
 * dead-letter topic is read up to its end when the replay begins, so what fails again during the
 * replay is not replayed twice; nothing is removed from it. Each replayed dead letter is recorded
 * on the pipeline's replays topic once Kafka took its batch, and a later replay skips it unless
 * asked to hand it over again.
 */
public final class DeadLetterReplay {
  /**
   * How long a replay stopped by a signal waits for Kafka's answers on the batches it sent, so it
   * can say what it did before the JVM exits.
   */
  public static final Duration STOPPED_ANSWER_WAIT = Duration.ofSeconds(20);

  /**
   * What a pipeline's batches are: which topics they run from, how one reads, and, for an entity
   * (buffer or parent table) the configuration no longer works on, why its batches are left (null
   * for one it works on).
   */
  public record Batches(
      Predicate<String> isBatchesTopic,
      Function<byte[], Batch> describe,
      Function<String, String> unconfigured) {
    /** Batches whose every entity the configuration still works on (a topic per entity). */
    public Batches(Predicate<String> isBatchesTopic, Function<byte[], Batch> describe) {
      this(isBatchesTopic, describe, entity -> null);
    }
  }

  /**
   * One batch as the replay lists it.
   *
   * @param entity the buffer or parent table it belongs to
   * @param size events or deleted rows in it
   */
  public record Batch(String entity, int size) {}

  /** What the replay did with a dead letter. */
  public enum Fate {
    REPLAYED,
    WOULD_REPLAY,
    /** Replayed by an earlier replay; {@link Letter#replayedAt} says when. */
    REPLAYED_BEFORE,
    LEFT
  }

  /**
   * What to replay.
   *
   * @param since only what was dead-lettered at or after it; everything when null
   * @param only which of the batches' entities (buffers or parent tables) to replay
   * @param dryRun list only, send nothing
   * @param again replay also what an earlier replay handed over
   */
  public record Request(Instant since, Predicate<String> only, boolean dryRun, boolean again) {}

  /**
   * One dead letter.
   *
   * @param position where it is: dead-letter topic-partition@offset
   * @param failedAt when it was dead-lettered
   * @param error why, as its headers say
   * @param entity its batch's buffer or parent table; null when it is not a batch
   * @param size events or rows in its batch; 0 when it is not a batch
   * @param sentTo the batches topic it went (or would go) back to; null when left
   * @param left why it was left; null unless it was
   * @param replayedAt when an earlier replay handed it over; null unless it was skipped for that
   */
  public record Letter(
      String position,
      Instant failedAt,
      String error,
      String entity,
      int size,
      String sentTo,
      Fate fate,
      String left,
      Instant replayedAt) {
    static Letter left(String position, Instant failedAt, String error, String why) {
      return new Letter(position, failedAt, error, null, 0, null, Fate.LEFT, why, null);
    }
  }

  private DeadLetterReplay() {}

  /**
   * Replays the dead letters of {@code dlq} that {@code request} asks for.
   *
   * @param replays the pipeline's replays topic; created, with this replication factor, when first
   *     written to
   */
  public static List<Letter> replay(
      String bootstrapServers,
      Map<String, String> kafkaProperties,
      short replicationFactor,
      String dlq,
      String replays,
      Batches batches,
      Request request)
      throws InterruptedException, IncompleteReplay {
    Map<String, List<Replayed>> replayedBefore = new HashMap<>();
    List<Letter> letters = new ArrayList<>();
    try (TopicRange range = TopicRange.open(bootstrapServers, kafkaProperties);
        Sender sender =
            new Sender(
                () -> {
                  TopicProvisioner.ensure(
                      bootstrapServers,
                      kafkaProperties,
                      List.of(),
                      List.of(replays),
                      1,
                      replicationFactor);
                  return KafkaClients.producer(
                      Map.of(), kafkaProperties, bootstrapServers, "spillway-replay");
                },
                replays)) {
      // A batch goes back only to a topic Kafka has: a producer would wait for another, or have a
      // broker that makes topics when asked make it with its own settings, which run keeps.
      Map<String, Boolean> topics = new HashMap<>();
      Predicate<String> inKafka =
          topic -> {
            Boolean there = topics.get(topic);
            if (there == null) {
              try {
                there = !range.partitions(topic).isEmpty();
              } catch (InterruptedException e) {
                throw new InterruptException(e);
              }
              topics.put(topic, there);
            }
            return there;
          };
      // In the topic's order, the same from run to run; each batch is sent as it is read, so
      // memory holds the producer's buffer, not the dead-letter topic.
      TopicRange.Each each =
          r -> {
            // A batch sent is recorded as soon as Kafka has taken it, not when the next is sent:
            // the last one to hand over may be followed by many letters to pass over.
            sender.recordTaken();
            Letter letter = examine(r, batches, request, replayedBefore, inKafka);
            if (letter.entity() != null && !request.only().test(letter.entity())) {
              return;
            }
            // Record times need not be in order (a letter sent late, another instance's clock):
            // reading starts at the first written since, and each letter goes by its failure.
            if (request.since() != null && letter.failedAt().isBefore(request.since())) {
              return;
            }
            letters.add(letter);
            if (letter.fate() == Fate.REPLAYED) {
              sender.send(
                  new ProducerRecord<>(letter.sentTo(), null, r.key(), r.value(), replayHeaders(r)),
                  letter.failedAt());
            }
          };
      try {
        range.read(
            replays,
            TopicRange.all(),
            r -> {
              if (r.key() != null) {
                OptionalLong letter = SinkHeaders.failedAt(r.headers());
                replayedBefore
                    .computeIfAbsent(SinkHeaders.text(r.key()), k -> new ArrayList<>())
                    .add(
                        new Replayed(
                            Instant.ofEpochMilli(r.timestamp()),
                            letter.isPresent() ? Instant.ofEpochMilli(letter.getAsLong()) : null));
              }
            });
        range.readInOrder(
            dlq,
            request.since() == null ? TopicRange.all() : range.writtenFrom(request.since()),
            each);
        sender.finish();
      } catch (InterruptedException | InterruptException e) {
        // Stopped (a signal), while reading or while waiting for Kafka's last answers: what Kafka
        // took is recorded, so the next replay hands over the rest.
        Thread.interrupted();
        sender.finishWithin(STOPPED_ANSWER_WAIT);
        throw IncompleteReplay.stopped(sender.recorded(), sender.unanswered(), e);
      } catch (RuntimeException e) {
        // What went out is recorded, so the next replay does not hand it over again.
        try {
          sender.finish();
        } catch (IncompleteReplay | InterruptedException | RuntimeException f) {
          e.addSuppressed(f);
          if (f instanceof InterruptedException) {
            Thread.currentThread().interrupt();
          }
        }
        throw e;
      }
    }
    return letters;
  }

  /**
   * Lists the dead letters of {@code dlq} as a dry run of a replay of all of them would: sends and
   * records nothing.
   */
  public static List<Letter> list(
      String bootstrapServers,
      Map<String, String> kafkaProperties,
      String dlq,
      String replays,
      Batches batches)
      throws InterruptedException {
    try {
      // A dry run sends nothing, so the replays topic's replication factor is never asked.
      return replay(
          bootstrapServers,
          kafkaProperties,
          (short) 1,
          dlq,
          replays,
          batches,
          new Request(null, entity -> true, true, false));
    } catch (IncompleteReplay e) {
      if (e.stopped()) {
        throw new InterruptedException("stopped while reading the dead letters");
      }
      throw new IllegalStateException("a dry run sent a batch", e);
    }
  }

  private static Letter examine(
      ConsumerRecord<byte[], byte[]> r,
      Batches batches,
      Request request,
      Map<String, List<Replayed>> replayedBefore,
      Predicate<String> inKafka) {
    String position = SinkHeaders.position(r.topic(), r.partition(), r.offset());
    Instant failedAt =
        Instant.ofEpochMilli(SinkHeaders.failedAt(r.headers()).orElse(r.timestamp()));
    String error = error(r);
    String source = header(r, SinkHeaders.SOURCE);
    String sourceTopic = source == null ? null : topicOf(source);
    if (source == null) {
      return Letter.left(position, failedAt, error, "it names no source");
    }
    // A batch dead-lettered on its way back from the delay topic names the topic it returns to.
    String returnTopic = header(r, SinkHeaders.BATCHES_TOPIC);
    String batchesTopic = returnTopic != null ? returnTopic : sourceTopic;
    if (batchesTopic != null
        && !batches.isBatchesTopic().test(batchesTopic)
        && (returnTopic != null || batchesTopic.endsWith(Topics.BUFFER_BATCHES_SUFFIX))) {
      return Letter.left(
          position,
          failedAt,
          error,
          "its batches topic "
              + batchesTopic
              + " is not one of this configuration's (its buffer left out of it?)");
    }
    if (batchesTopic == null || !batches.isBatchesTopic().test(batchesTopic)) {
      // A record read before batching, or a change capture could not publish (a row too large).
      return Letter.left(
          position, failedAt, error, "not a batch: it failed on " + source + ", before batching");
    }
    Batch batch;
    try {
      batch = batches.describe().apply(r.value());
    } catch (RuntimeException e) {
      return Letter.left(position, failedAt, error, "its batch does not decode: " + e.getMessage());
    }
    // Left when the configuration no longer works on its entity: handed back, it would be taken
    // as done with nothing done.
    String unconfigured = batches.unconfigured().apply(batch.entity());
    if (unconfigured == null && !inKafka.test(batchesTopic)) {
      unconfigured =
          "its batches topic "
              + batchesTopic
              + " is not in Kafka (start run with this configuration, which makes it, then"
              + " replay)";
    }
    // A replay of another letter at its position (the topic deleted and made again since) does
    // not count: it names another letter's failure time, or, recorded before the replays named
    // it, came before this letter failed.
    Instant before =
        replayedBefore.getOrDefault(position, List.of()).stream()
            .filter(
                p ->
                    p.letterFailedAt() == null
                        ? !p.at().isBefore(failedAt)
                        : p.letterFailedAt().equals(failedAt))
            .map(Replayed::at)
            .max(Instant::compareTo)
            .orElse(null);
    Fate fate;
    if (unconfigured != null) {
      fate = Fate.LEFT;
    } else if (before != null && !request.again()) {
      fate = Fate.REPLAYED_BEFORE;
    } else {
      fate = request.dryRun() ? Fate.WOULD_REPLAY : Fate.REPLAYED;
    }
    boolean goes = fate == Fate.REPLAYED || fate == Fate.WOULD_REPLAY;
    return new Letter(
        position,
        failedAt,
        error,
        batch.entity(),
        batch.size(),
        goes ? batchesTopic : null,
        fate,
        unconfigured,
        fate == Fate.REPLAYED_BEFORE ? before : null);
  }

  /** The topic of a topic-partition@offset position; null when it is not one. */
  static String topicOf(String position) {
    int at = position.lastIndexOf('@');
    int dash = at < 0 ? -1 : position.lastIndexOf('-', at);
    if (dash <= 0) {
      return null;
    }
    String partition = position.substring(dash + 1, at);
    return partition.isEmpty() || !partition.chars().allMatch(Character::isDigit)
        ? null
        : position.substring(0, dash);
  }

  private static String error(ConsumerRecord<byte[], byte[]> r) {
    String cls = header(r, SinkHeaders.ERROR_CLASS);
    String message = header(r, SinkHeaders.ERROR_MESSAGE);
    if (cls == null) {
      return message == null ? "" : message;
    }
    String simple = cls.substring(cls.lastIndexOf('.') + 1);
    return message == null || message.isEmpty() ? simple : simple + ": " + message;
  }

  private static String header(ConsumerRecord<byte[], byte[]> r, String key) {
    Header h = r.headers().lastHeader(key);
    return h == null ? null : SinkHeaders.text(h.value());
  }

  /** The dead letter's headers less its runs' state, with where it was replayed from. */
  private static RecordHeaders replayHeaders(ConsumerRecord<byte[], byte[]> r) {
    RecordHeaders h = new RecordHeaders();
    for (Header header : r.headers()) {
      if (!SinkHeaders.RUN_STATE.contains(header.key())
          && !header.key().equals(SinkHeaders.REPLAYED_FROM)) {
        h.add(header);
      }
    }
    h.add(
        SinkHeaders.REPLAYED_FROM,
        SinkHeaders.text(SinkHeaders.position(r.topic(), r.partition(), r.offset())));
    return h;
  }

  /**
   * One replay recorded of a dead letter's position.
   *
   * @param at when it was replayed
   * @param letterFailedAt when the letter replayed had failed; null on records written before the
   *     replays named it
   */
  private record Replayed(Instant at, Instant letterFailedAt) {}

  /**
   * The record saying a batch was replayed: keyed by the dead letter it came from (its {@code
   * spillway.replayed-from}), naming the batches topic it went to, with the letter's {@code
   * spillway.failed-at}, which tells it from a later letter at the same position.
   */
  private static ProducerRecord<byte[], byte[]> replayRecord(
      String replays, ProducerRecord<byte[], byte[]> sent, Instant letterFailedAt) {
    RecordHeaders h = new RecordHeaders();
    SinkHeaders.setFailedAt(h, letterFailedAt.toEpochMilli());
    return new ProducerRecord<>(
        replays,
        null,
        sent.headers().lastHeader(SinkHeaders.REPLAYED_FROM).value(),
        SinkHeaders.text(sent.topic()),
        h);
  }

  /**
   * A replay Kafka did not wholly take, or one stopped part-way: the batches Kafka took run and
   * were recorded as replayed (but for {@code unrecorded} of them), the others were not sent.
   */
  public static final class IncompleteReplay extends Exception {
    private final int taken;
    private final int failed;
    private final int unrecorded;
    private final boolean stopped;

    /**
     * Kafka took {@code taken} replayed batches, of which it could not record {@code unrecorded} as
     * replayed, and refused {@code failed}; {@code cause} is the record's failure, or the send's.
     */
    public IncompleteReplay(int taken, int failed, int unrecorded, Throwable cause) {
      this(taken, failed, unrecorded, false, cause);
    }

    private IncompleteReplay(
        int taken, int failed, int unrecorded, boolean stopped, Throwable cause) {
      super(cause.getMessage(), cause);
      this.taken = taken;
      this.failed = failed;
      this.unrecorded = unrecorded;
      this.stopped = stopped;
    }

    /**
     * Interrupted part-way, with {@code recorded} batches handed over and recorded as replayed, and
     * {@code unanswered} sent that Kafka did not say within {@link #STOPPED_ANSWER_WAIT} it took
     * and recorded (or could not record).
     */
    static IncompleteReplay stopped(int recorded, int unanswered, Exception interruption) {
      return new IncompleteReplay(recorded, 0, unanswered, true, interruption);
    }

    public int taken() {
      return taken;
    }

    public int failed() {
      return failed;
    }

    /**
     * Batches Kafka took that could not be recorded as replayed: a next replay hands them again.
     * For a replay {@link #stopped}, the batches sent that are not known taken and recorded: Kafka
     * may have run them, and a next replay hands them over again.
     */
    public int unrecorded() {
      return unrecorded;
    }

    /**
     * Interrupted (a signal) before it read the dead-letter topic to its end or had Kafka's answer
     * on every batch it sent.
     */
    public boolean stopped() {
      return stopped;
    }
  }

  /**
   * Sends batches as they come and records each as replayed once Kafka took it, while the replay
   * goes on: a replay cut off hands over again next time only what was in flight (at least once).
   * The replays topic is made sure of before the first batch goes: a replay that cannot be recorded
   * sends nothing.
   */
  static final class Sender implements AutoCloseable {
    /** Makes the producer, and whatever it writes to, at the first send. */
    interface ProducerFactory {
      Producer<byte[], byte[]> make() throws InterruptedException;
    }

    /**
     * How long a stopped replay waits for the records of replays it sends last: those of batches
     * Kafka answered behind one it had not answered at the end of the wait.
     */
    static final Duration LATE_RECORD_WAIT = Duration.ofSeconds(5);

    private final ProducerFactory factory;
    private final String replays;
    private Producer<byte[], byte[]> producer;

    /** A batch sent: its acknowledgement, and what the replays topic gets once Kafka took it. */
    private record Sent(Future<RecordMetadata> ack, ProducerRecord<byte[], byte[]> record) {}

    /** Batches not yet known taken or refused, in the order sent. */
    private final Deque<Sent> sent = new ArrayDeque<>();

    /** Records of replays sent and not yet acknowledged. */
    private final Deque<Future<RecordMetadata>> recording = new ArrayDeque<>();

    private int taken;
    private int failed;
    private int unrecorded;
    private Throwable failure;
    private Throwable recordFailure;

    Sender(ProducerFactory factory, String replays) {
      this.factory = factory;
      this.replays = replays;
    }

    void send(ProducerRecord<byte[], byte[]> batch, Instant letterFailedAt)
        throws InterruptedException {
      if (producer == null) {
        producer = factory.make();
      }
      sent.add(new Sent(producer.send(batch), replayRecord(replays, batch, letterFailedAt)));
      recordTaken();
    }

    /** Batches Kafka took (and are recorded, or being recorded, as replayed). */
    int taken() {
      return taken;
    }

    /** Batches Kafka took and recorded as replayed, as far as its answers tell. */
    int recorded() {
      return taken - recording.size() - unrecorded;
    }

    /** Batches sent that are not known taken and recorded: unanswered, or refused a record. */
    int unanswered() {
      return sent.size() + recording.size() + unrecorded;
    }

    /**
     * Records the batches Kafka took, in the order sent: those answered, waiting for the answers
     * that are not in until {@code deadline} ({@link System#nanoTime}), or without end when it is
     * {@link Long#MAX_VALUE}. Answers not in by then stay to be waited for.
     */
    private void settle(long deadline) throws InterruptedException {
      while (!sent.isEmpty() && answered(sent.peek(), deadline)) {
        sent.poll();
      }
      awaitRecords(deadline);
    }

    /**
     * Records the batch if Kafka answered on it by {@code deadline}: sends its record of replay
     * when Kafka took it, counts it when Kafka refused it. Whether Kafka answered.
     */
    private boolean answered(Sent batch, long deadline) throws InterruptedException {
      try {
        batch.ack().get(untilNanos(deadline), TimeUnit.NANOSECONDS);
        recording.add(producer.send(batch.record()));
        taken++;
      } catch (ExecutionException e) {
        failed++;
        failure = failure == null ? e.getCause() : failure;
      } catch (TimeoutException e) {
        return false;
      }
      return true;
    }

    /** Counts the records of replays Kafka answered on by {@code deadline}, in the order sent. */
    private void awaitRecords(long deadline) throws InterruptedException {
      while (!recording.isEmpty()) {
        try {
          recording.peek().get(untilNanos(deadline), TimeUnit.NANOSECONDS);
        } catch (ExecutionException e) {
          unrecorded++;
          recordFailure = recordFailure == null ? e.getCause() : recordFailure;
        } catch (TimeoutException e) {
          break;
        }
        recording.poll();
      }
    }

    private static long untilNanos(long deadline) {
      return deadline == Long.MAX_VALUE
          ? Long.MAX_VALUE
          : Math.max(0, deadline - System.nanoTime());
    }

    /** Records the batches Kafka has taken so far, in the order sent, waiting for nothing. */
    void recordTaken() throws InterruptedException {
      if (producer != null) {
        settle(System.nanoTime());
      }
    }

    /**
     * Waits up to {@code wait} for Kafka's answers on what was sent and records what it took: a
     * stopped replay's last step, after which {@link #recorded} and {@link #unanswered} say where
     * it stands.
     */
    void finishWithin(Duration wait) throws InterruptedException {
      if (producer == null) {
        return;
      }
      settle(System.nanoTime() + wait.toNanos());
      // Kafka answers each partition on its own: batches behind one it has not answered may have
      // been taken. Recorded too, they are not handed over again.
      boolean late = false;
      for (Iterator<Sent> i = sent.iterator(); i.hasNext(); ) {
        if (answered(i.next(), System.nanoTime())) {
          i.remove();
          late = true;
        }
      }
      if (late) {
        awaitRecords(System.nanoTime() + LATE_RECORD_WAIT.toNanos());
      }
    }

    /** Waits until every batch sent is taken or refused and what was taken is recorded. */
    void finish() throws InterruptedException, IncompleteReplay {
      if (producer == null) {
        return;
      }
      settle(Long.MAX_VALUE);
      if (recordFailure != null) {
        throw new IncompleteReplay(taken, failed, unrecorded, recordFailure);
      }
      if (failure != null) {
        throw new IncompleteReplay(taken, failed, 0, failure);
      }
    }

    /**
     * Closes the producer. Every batch sent was answered by then, or the replay failed or was
     * stopped: a close cut short by an interrupt (a signal as the replay ends) loses nothing, and
     * says nothing. Sends a stopped replay had no answer on are given up at once; it said so.
     */
    @Override
    public void close() {
      if (producer != null) {
        try {
          if (sent.isEmpty() && recording.isEmpty()) {
            producer.close();
          } else {
            producer.close(Duration.ZERO);
          }
        } catch (org.apache.kafka.common.KafkaException e) {
          if (e instanceof InterruptException || Thread.currentThread().isInterrupted()) {
            Thread.currentThread().interrupt();
          } else {
            throw e;
          }
        }
      }
    }
  }
}
