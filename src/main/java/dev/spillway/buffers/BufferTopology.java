package dev.spillway.buffers;

import dev.spillway.event.EventSerdes;
import dev.spillway.event.Pipeline;
import dev.spillway.event.Topics;
import dev.spillway.streams.Batcher;
import dev.spillway.streams.CheckOrDeadLetter;
import dev.spillway.streams.CheckOrDeadLetter.Verdict;
import java.util.List;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.processor.api.Record;

/**
 * One buffer's Kafka Streams topology: its captured inserts become batches of at most {@code
 * batch-size} events, closed no later than {@code max-wait} after the first (at most a check and a
 * half earlier, a check being a tenth of it, 20 ms to a second), each keyed by its group id so
 * batches spread over the partitions of {@code <prefix>.buffers.<name>.batches} and run in
 * parallel. Events that do not decode go to the pipeline's dead-letter topic with the reason; an
 * insert capture published a second time is passed over ({@link PassOverRepeats}). Pure: no SQL, no
 * calls out.
 */
public final class BufferTopology {
  static final String SOURCE = "buffer-events";
  static final String CHECK = "check-event";
  static final String REPEATS = "pass-over-repeats";
  static final String SEEN = "inserts-seen";
  static final String BATCHER = "batch-events";
  static final String STORE = "pending-events";
  static final String BATCHES = "buffer-batches";
  static final String MALFORMED = "malformed-events";

  private BufferTopology() {}

  /** Every topic a buffer's topology reads, writes, or has Kafka Streams keep for its stores. */
  static List<String> topicNames(Topics topics, String buffer) {
    return List.of(
        topics.bufferEvents(buffer),
        topics.bufferBatches(buffer),
        topics.changelog(Pipeline.BUFFERS, buffer, SEEN),
        topics.changelog(Pipeline.BUFFERS, buffer, STORE));
  }

  /**
   * @param malformed told of each event the first node sends to the dead-letter topic
   * @param republished told of each insert published a second time that is passed over
   */
  public static Topology build(
      BufferSettings buffer, Topics topics, Runnable malformed, Runnable republished) {
    Topology t = new Topology();
    t.addSource(
        SOURCE,
        new StringDeserializer(),
        new ByteArrayDeserializer(),
        topics.bufferEvents(buffer.name()));
    t.addProcessor(
        CHECK,
        () -> new CheckOrDeadLetter(BufferTopology::check, REPEATS, MALFORMED, malformed),
        SOURCE);
    t.addProcessor(REPEATS, () -> new PassOverRepeats(SEEN, republished), CHECK);
    t.addStateStore(PassOverRepeats.store(SEEN), REPEATS);
    t.addProcessor(
        BATCHER,
        () ->
            new Batcher(
                STORE,
                buffer.batchSize(),
                buffer.maxWait(),
                (key, values) -> toBatch(buffer.name(), values)),
        REPEATS);
    t.addStateStore(Batcher.store(STORE), BATCHER);
    t.addSink(
        BATCHES,
        topics.bufferBatches(buffer.name()),
        new StringSerializer(),
        new ByteArraySerializer(),
        BATCHER);
    t.addSink(
        MALFORMED,
        topics.dlq(dev.spillway.event.Pipeline.BUFFERS),
        new StringSerializer(),
        new ByteArraySerializer(),
        CHECK);
    return t;
  }

  /** The batch of these events, keyed by its group id. */
  static KeyValue<String, byte[]> toBatch(String buffer, List<byte[]> values) {
    EventSerdes.EncodedBatch batch = EventSerdes.encodeBufferBatch(buffer, values);
    return KeyValue.pair(batch.groupId(), batch.bytes());
  }

  /**
   * Passes keyed events that decode on to the next node; one without a key is rejected, and one
   * that does not decode throws, so the node dead-letters it with the exception's class and
   * message.
   */
  private static Verdict check(Record<String, byte[]> record) {
    if (record.key() == null) {
      return Verdict.reject(
          "MalformedBufferEvent", "no key: capture keys each buffer event by its table");
    }
    EventSerdes.decodeBufferEvent(record.value());
    return Verdict.pass(record.key());
  }
}
