package dev.spillway.sink;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.spillway.testing.SettableClock;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.NavigableSet;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Function;
import java.util.stream.LongStream;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.MockConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.MockProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.InvalidRecordException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InvalidTopicException;
import org.apache.kafka.common.errors.NotEnoughReplicasException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.TopicAuthorizationException;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.Test;

class DelayedReleaserTest {
  private static final Instant NOW = Instant.parse("2026-11-25T08:00:00Z");
  private static final TopicPartition TP = new TopicPartition("t.delayed", 0);

  private final SettableClock clock = new SettableClock(NOW);
  private final MockProducer<byte[], byte[]> producer =
      new MockProducer<>(true, null, new ByteArraySerializer(), new ByteArraySerializer());
  private MockConsumer<byte[], byte[]> consumer = new MockConsumer<>("earliest");

  /** The topics the releaser asked Kafka whether it has. */
  private final List<String> asked = new java.util.ArrayList<>();

  private DelayedReleaser releaser = releaser(consumer, DelayedReleaser.DEFAULT_HOLD_BYTES);

  private DelayedReleaser releaser(MockConsumer<byte[], byte[]> c, long holdBytes) {
    DelayedReleaser r =
        new DelayedReleaser(
            c,
            producer,
            TP.topic(),
            List.of("t.batches", "t.other.batches"),
            topic -> {
              asked.add(topic);
              return topic.equals("t.elsewhere.batches");
            },
            "t.dlq",
            (record, error) -> Map.of("x.rows", "kept".getBytes(StandardCharsets.UTF_8)),
            clock,
            Duration.ofMillis(10),
            holdBytes);
    c.rebalance(List.of(TP));
    c.updateBeginningOffsets(Map.of(TP, 0L));
    return r;
  }

  /**
   * A releaser of one batches topic, sending through {@code sender}, on a fresh consumer holding
   * {@link #TP}.
   */
  private void releaseThrough(MockProducer<byte[], byte[]> sender) {
    consumer = new MockConsumer<>("earliest");
    releaser =
        new DelayedReleaser(
            consumer,
            sender,
            TP.topic(),
            List.of("t.batches"),
            topic -> false,
            "t.dlq",
            (record, error) -> Map.of(),
            clock,
            Duration.ofMillis(10),
            1L << 20);
    consumer.rebalance(List.of(TP));
    consumer.updateBeginningOffsets(Map.of(TP, 0L));
  }

  /** A batch at {@code offset} due {@code in} from the start of the test. */
  private void delayed(long offset, Duration in) {
    delayed(offset, in, null);
  }

  /** The same, returning to {@code batchesTopic} (null: none named). */
  private void delayed(long offset, Duration in, String batchesTopic) {
    RecordHeaders headers = new RecordHeaders();
    headers.add(SinkHeaders.CONSUME_AFTER, SinkHeaders.longValue(NOW.plus(in).toEpochMilli()));
    if (batchesTopic != null) {
      headers.add(SinkHeaders.BATCHES_TOPIC, SinkHeaders.text(batchesTopic));
    }
    consumer.addRecord(
        new ConsumerRecord<>(
            TP.topic(),
            TP.partition(),
            offset,
            0L,
            TimestampType.CREATE_TIME,
            0,
            0,
            ("k" + offset).getBytes(),
            ("batch " + offset).getBytes(),
            headers,
            Optional.empty()));
  }

  private List<String> sent() {
    return producer.history().stream().map(r -> new String(r.value())).toList();
  }

  private OffsetAndMetadata committed() {
    return consumer.committed(Set.of(TP)).get(TP);
  }

  @Test
  void should_release_a_batch_when_due_though_one_due_later_is_ahead_of_it() throws Exception {
    delayed(0, Duration.ofMinutes(10));
    delayed(1, Duration.ofSeconds(1));
    delayed(2, Duration.ofSeconds(4));

    assertThat(releaser.runOnce()).isZero();
    assertThat(releaser.waiting()).isEqualTo(3);

    clock.advance(Duration.ofSeconds(1));
    assertThat(releaser.runOnce()).isOne();
    assertThat(sent()).containsExactly("batch 1");
    assertThat(committed().offset()).as("the first batch not released").isZero();

    clock.advance(Duration.ofSeconds(3));
    releaser.runOnce();
    assertThat(sent()).containsExactly("batch 1", "batch 2");

    clock.advance(Duration.ofMinutes(10));
    releaser.runOnce();
    assertThat(sent()).containsExactly("batch 1", "batch 2", "batch 0");
    assertThat(producer.history()).extracting(ProducerRecord::topic).containsOnly("t.batches");
    assertThat(committed().offset()).isEqualTo(3);
    assertThat(releaser.waiting()).isZero();
  }

  @Test
  void should_dead_letter_a_batch_whose_batches_topic_kafka_no_longer_has() throws Exception {
    delayed(0, Duration.ZERO, "t.other.batches");
    delayed(1, Duration.ZERO, "t.gone.batches");
    delayed(2, Duration.ZERO, null);
    delayed(3, Duration.ZERO, "t.elsewhere.batches"); // another instance's buffer

    assertThat(releaser.runOnce()).isEqualTo(4);

    assertThat(producer.history())
        .extracting(r -> r.topic() + ": " + new String(r.value()))
        .containsExactly(
            "t.other.batches: batch 0",
            "t.dlq: batch 1",
            "t.batches: batch 2",
            "t.elsewhere.batches: batch 3");
    ProducerRecord<byte[], byte[]> letter = producer.history().get(1);
    assertThat(SinkHeaders.text(letter.headers(), SinkHeaders.ERROR_MESSAGE))
        .isEqualTo(
            "it was delayed to return to t.gone.batches, a topic Kafka no longer has (its buffer"
                + " left out of the configuration and the topic deleted?)");
    assertThat(SinkHeaders.text(letter.headers(), SinkHeaders.BATCHES_TOPIC))
        .as("where a replay hands it")
        .isEqualTo("t.gone.batches");
    assertThat(SinkHeaders.text(letter.headers(), "x.rows"))
        .as("what the pipeline adds to its letters")
        .isEqualTo("kept");
    assertThat(committed().offset()).isEqualTo(4);
  }

  @Test
  void should_ask_kafka_for_another_instances_topic_once_a_minute() throws Exception {
    delayed(0, Duration.ZERO, "t.elsewhere.batches");
    delayed(1, Duration.ZERO, "t.elsewhere.batches");
    releaser.runOnce();
    delayed(2, Duration.ofSeconds(30), "t.elsewhere.batches");
    delayed(3, Duration.ofMinutes(2), "t.elsewhere.batches");
    clock.advance(Duration.ofSeconds(30));
    releaser.runOnce();
    assertThat(sent()).containsExactly("batch 0", "batch 1", "batch 2");
    assertThat(asked)
        .as("once for the first minute's batches, a later turn's among them")
        .containsExactly("t.elsewhere.batches");

    clock.advance(Duration.ofMinutes(2));
    releaser.runOnce();

    assertThat(asked).hasSize(2);
    assertThat(sent()).containsExactly("batch 0", "batch 1", "batch 2", "batch 3");
  }

  @Test
  void should_not_release_again_after_a_restart_what_it_released_behind_a_batch_not_due()
      throws Exception {
    delayed(0, Duration.ofMinutes(10));
    delayed(1, Duration.ofSeconds(1));
    delayed(2, Duration.ofMinutes(10));
    delayed(3, Duration.ofSeconds(1));
    clock.advance(Duration.ofSeconds(1));
    releaser.runOnce();
    assertThat(sent()).containsExactly("batch 1", "batch 3");
    OffsetAndMetadata commit = committed();
    releaser.close();

    // Another process takes the partition over from the commit and reads it all again.
    consumer = new MockConsumer<>("earliest");
    releaser = releaser(consumer, DelayedReleaser.DEFAULT_HOLD_BYTES);
    consumer.commitSync(Map.of(TP, commit));
    consumer.seek(TP, commit.offset());
    for (long o = 0; o < 4; o++) {
      delayed(o, o % 2 == 0 ? Duration.ofMinutes(10) : Duration.ofSeconds(1));
    }
    releaser.runOnce();
    assertThat(sent()).as("nothing more yet").containsExactly("batch 1", "batch 3");

    clock.advance(Duration.ofMinutes(10));
    releaser.runOnce();
    assertThat(sent()).containsExactly("batch 1", "batch 3", "batch 0", "batch 2");
    assertThat(committed().offset()).isEqualTo(4);
  }

  @Test
  void should_keep_a_batch_it_failed_to_release_and_release_it_at_a_later_turn() throws Exception {
    delayed(0, Duration.ZERO);
    delayed(1, Duration.ZERO);
    producer.sendException = new TimeoutException("no leader for t.batches-0");

    assertThatThrownBy(releaser::runOnce).hasMessageContaining("no leader");
    assertThat(committed().offset()).as("not past a batch not released").isZero();
    assertThat(releaser.waiting()).isEqualTo(2);

    producer.sendException = null;
    delayed(2, Duration.ZERO);
    releaser.runOnce();

    assertThat(sent()).containsExactly("batch 0", "batch 1", "batch 2");
    assertThat(committed().offset()).isEqualTo(3);
  }

  @Test
  void should_stop_reading_while_it_holds_its_fill_and_read_on_once_batches_left()
      throws Exception {
    consumer = new MockConsumer<>("earliest");
    releaser = releaser(consumer, 1); // any batch fills it
    delayed(0, Duration.ofSeconds(1));
    releaser.runOnce();
    releaser.runOnce();
    assertThat(consumer.paused()).containsExactly(TP);

    delayed(1, Duration.ZERO);
    releaser.runOnce();
    assertThat(releaser.waiting()).as("batch 1 left in Kafka").isOne();
    assertThat(sent()).isEmpty();

    clock.advance(Duration.ofSeconds(1));
    releaser.runOnce(); // releases batch 0
    releaser.runOnce(); // reads on
    assertThat(consumer.paused()).isEmpty();
    assertThat(sent()).containsExactly("batch 0", "batch 1");
  }

  @Test
  void should_forget_what_it_held_of_a_partition_taken_away() throws Exception {
    delayed(0, Duration.ofMinutes(10));
    releaser.runOnce();
    assertThat(releaser.waiting()).isOne();

    consumer.rebalance(List.of());
    clock.advance(Duration.ofMinutes(10));
    releaser.runOnce();
    assertThat(sent()).as("the new owner's to release").isEmpty();
    assertThat(releaser.waiting()).isZero();
  }

  @Test
  void should_release_each_batch_once_when_a_partition_is_taken_away_and_given_back()
      throws Exception {
    delayed(0, Duration.ofMinutes(10));
    delayed(1, Duration.ofSeconds(1));
    delayed(2, Duration.ofMinutes(10));
    clock.advance(Duration.ofSeconds(1));
    releaser.runOnce();
    assertThat(sent()).containsExactly("batch 1");

    // A rebalance takes the partition away and gives it back: read again from the commit.
    consumer.rebalance(List.of());
    consumer.rebalance(List.of(TP));
    consumer.seek(TP, committed().offset());
    for (long o = 0; o < 3; o++) {
      delayed(o, o == 1 ? Duration.ofSeconds(1) : Duration.ofMinutes(10));
    }
    releaser.runOnce();
    assertThat(sent()).as("nothing more yet").containsExactly("batch 1");
    assertThat(releaser.waiting()).isEqualTo(2);

    clock.advance(Duration.ofMinutes(10));
    releaser.runOnce();
    releaser.runOnce();
    assertThat(sent()).containsExactly("batch 1", "batch 0", "batch 2");
    assertThat(committed().offset()).isEqualTo(3);
    assertThat(releaser.waiting()).isZero();
  }

  @Test
  void should_keep_a_batch_whose_send_kafka_failed_and_release_it_at_a_later_turn()
      throws Exception {
    AtomicBoolean failing = new AtomicBoolean(true);
    MockProducer<byte[], byte[]> flaky =
        answering(
            r ->
                failing.get()
                    ? CompletableFuture.failedFuture(new TimeoutException("no leader"))
                    : null);
    releaseThrough(flaky);
    delayed(0, Duration.ZERO);

    assertThatThrownBy(releaser::runOnce).hasRootCauseMessage("no leader");
    assertThat(releaser.waiting()).isOne();
    assertThat(committed().offset()).isZero();

    failing.set(false);
    releaser.runOnce();
    assertThat(flaky.history()).extracting(r -> new String(r.value())).containsExactly("batch 0");
    assertThat(committed().offset()).isOne();
  }

  @Test
  void should_take_only_refusals_of_the_batch_or_its_topic_as_for_good() {
    assertThat(
            List.of(
                new RecordTooLargeException("too large"),
                new InvalidRecordException("not a record"),
                new InvalidTopicException("no such name"),
                new TopicAuthorizationException("not allowed")))
        .allMatch(DelayedReleaser::refusedForGood);
    assertThat(
            List.of(
                new TimeoutException("no leader"),
                new OutOfOrderSequenceException("sequence"),
                new ProducerFencedException("fenced"),
                new NotEnoughReplicasException("one in sync")))
        .noneMatch(DelayedReleaser::refusedForGood);
  }

  @Test
  void should_dead_letter_a_batch_kafka_refuses_back_for_good_and_go_on_past_it() throws Exception {
    AtomicBoolean lettersRefused = new AtomicBoolean(true);
    MockProducer<byte[], byte[]> refusing =
        answering(
            r ->
                new String(r.value()).equals("batch 0")
                        && (r.topic().equals("t.batches") || lettersRefused.get())
                    ? CompletableFuture.failedFuture(
                        new RecordTooLargeException("larger than the topic's max.message.bytes"))
                    : null);
    releaseThrough(refusing);
    delayed(0, Duration.ZERO);
    delayed(1, Duration.ZERO);

    // The dead-letter topic refuses it too: it stays held, and is tried again.
    assertThatThrownBy(releaser::runOnce)
        .hasRootCauseMessage("larger than the topic's max.message.bytes");
    assertThat(releaser.waiting()).as("held").isOne();
    assertThat(committed().offset()).as("the commit waits for it").isZero();

    lettersRefused.set(false);
    assertThat(releaser.runOnce()).isOne();
    assertThat(refusing.history())
        .extracting(r -> r.topic() + ": " + new String(r.value()))
        .containsExactly("t.batches: batch 1", "t.dlq: batch 0");
    ProducerRecord<byte[], byte[]> letter = refusing.history().get(1);
    assertThat(SinkHeaders.text(letter.headers(), SinkHeaders.ERROR_MESSAGE))
        .isEqualTo("Kafka refused it back on t.batches: larger than the topic's max.message.bytes");
    assertThat(SinkHeaders.text(letter.headers(), SinkHeaders.BATCHES_TOPIC))
        .as("where a replay hands it")
        .isEqualTo("t.batches");
    assertThat(letter.headers().lastHeader(SinkHeaders.CONSUME_AFTER)).isNull();
    assertThat(releaser.waiting()).isZero();
    assertThat(committed().offset()).as("past it").isEqualTo(2);
  }

  @Test
  void should_keep_a_batch_refused_for_good_whose_dead_letter_cannot_even_be_sent()
      throws Exception {
    AtomicBoolean closing = new AtomicBoolean(true);
    MockProducer<byte[], byte[]> refusing =
        answering(
            r -> {
              if (r.topic().equals("t.batches")) {
                return CompletableFuture.failedFuture(
                    new RecordTooLargeException("larger than the topic's max.message.bytes"));
              }
              if (closing.get()) {
                throw new IllegalStateException("the producer is closing");
              }
              return null;
            });
    releaseThrough(refusing);
    delayed(0, Duration.ZERO);

    assertThatThrownBy(releaser::runOnce).hasMessage("the producer is closing");
    assertThat(releaser.waiting()).as("held").isOne();

    closing.set(false);
    assertThat(releaser.runOnce()).as("due again at the next turn, and sent").isOne();
    assertThat(refusing.history())
        .extracting(r -> r.topic() + ": " + new String(r.value()))
        .containsExactly("t.dlq: batch 0");
    assertThat(committed().offset()).isOne();
  }

  @Test
  void should_keep_a_batch_refused_for_a_fault_of_the_producers_not_of_the_batch()
      throws Exception {
    MockProducer<byte[], byte[]> outOfSequence =
        answering(
            r ->
                r.topic().equals("t.batches")
                    ? CompletableFuture.failedFuture(
                        new OutOfOrderSequenceException("the broker saw another sequence number"))
                    : null);
    releaseThrough(outOfSequence);
    delayed(0, Duration.ZERO);

    assertThatThrownBy(releaser::runOnce)
        .hasRootCauseMessage("the broker saw another sequence number");
    assertThat(outOfSequence.history()).as("not sent to the dead letters").isEmpty();
    assertThat(releaser.waiting()).as("held for a later turn").isOne();
    assertThat(committed().offset()).isZero();
  }

  @Test
  void should_commit_what_it_released_when_a_partition_is_taken_away_after_a_failed_commit()
      throws Exception {
    AtomicBoolean refuseCommits = new AtomicBoolean();
    Map<TopicPartition, OffsetAndMetadata> commits = new HashMap<>();
    consumer =
        new MockConsumer<>("earliest") {
          @Override
          public synchronized void commitSync(Map<TopicPartition, OffsetAndMetadata> offsets) {
            if (refuseCommits.get()) {
              throw new RebalanceInProgressException("rebalancing");
            }
            super.commitSync(offsets);
            commits.putAll(offsets); // a mock consumer forgets what it no longer holds
          }
        };
    releaser = releaser(consumer, DelayedReleaser.DEFAULT_HOLD_BYTES);
    delayed(0, Duration.ofMinutes(10));
    delayed(1, Duration.ZERO);
    refuseCommits.set(true);
    assertThatThrownBy(releaser::runOnce).isInstanceOf(RebalanceInProgressException.class);
    assertThat(sent()).containsExactly("batch 1");

    refuseCommits.set(false);
    assertThat(commits).isEmpty();
    consumer.rebalance(List.of());
    assertThat(commits.get(TP).offset()).isZero();
    assertThat(ReleasedPastCommit.offsets(commits.get(TP))).as("batch 1 named").containsExactly(1L);
  }

  @Test
  void should_release_no_more_past_a_batch_not_due_than_its_commit_can_name() throws Exception {
    int behind = DelayedReleaser.NAMED_MAX + 100;
    delayed(0, Duration.ofMinutes(10));
    for (long o = 1; o <= behind; o++) {
      delayed(o, Duration.ZERO);
    }
    releaser.runOnce();
    releaser.runOnce();
    assertThat(producer.history()).hasSize(DelayedReleaser.NAMED_MAX);
    assertThat(ReleasedPastCommit.offsets(committed())).hasSize(DelayedReleaser.NAMED_MAX);
    assertThat(consumer.paused()).containsExactly(TP);

    clock.advance(Duration.ofMinutes(10));
    releaser.runOnce();
    releaser.runOnce();
    assertThat(producer.history()).hasSize(behind + 1);
    assertThat(committed().offset()).isEqualTo(behind + 1);
    assertThat(consumer.paused()).isEmpty();
  }

  @Test
  void should_pass_over_no_batch_when_reading_from_before_its_commit() throws Exception {
    // A commit at 1 naming 2, then the partition read again from 0 (its offsets reset).
    consumer.commitSync(
        Map.of(
            TP,
            new OffsetAndMetadata(1, ReleasedPastCommit.metadata(1, new TreeSet<>(Set.of(2L))))));
    consumer.seek(TP, 0);
    for (long o = 0; o < 3; o++) {
      delayed(o, Duration.ZERO);
    }
    releaser.runOnce();
    assertThat(sent()).containsExactly("batch 0", "batch 1", "batch 2");
  }

  @Test
  void should_name_as_many_released_offsets_as_fit_in_a_commit() {
    NavigableSet<Long> few = new TreeSet<>(List.of(101L, 102L, 140L));
    String text = ReleasedPastCommit.metadata(100, few);
    assertThat(ReleasedPastCommit.offsets(new OffsetAndMetadata(100, text))).isEqualTo(few);

    NavigableSet<Long> many = new TreeSet<>();
    LongStream.range(1, 5_000).forEach(o -> many.add(1_000_000 + o));
    String fitted = ReleasedPastCommit.metadata(1_000_000, many);
    assertThat(fitted.length()).isLessThanOrEqualTo(ReleasedPastCommit.METADATA_CHARS);
    NavigableSet<Long> back = ReleasedPastCommit.offsets(new OffsetAndMetadata(1_000_000, fitted));
    assertThat(back).isNotEmpty().isEqualTo(many.headSet(back.last(), true));

    assertThat(ReleasedPastCommit.metadata(7, new TreeSet<>())).isEmpty();
    assertThat(ReleasedPastCommit.offsets(new OffsetAndMetadata(7, "released:zz?"))).isEmpty();
    assertThat(ReleasedPastCommit.offsets(new OffsetAndMetadata(7, "something else"))).isEmpty();
  }

  /**
   * A producer whose sends {@code answer} answers (it may also throw, as a producer closing does),
   * the others taken as Kafka would when it gives null.
   */
  private static MockProducer<byte[], byte[]> answering(
      Function<ProducerRecord<byte[], byte[]>, Future<RecordMetadata>> answer) {
    return new MockProducer<>(true, null, new ByteArraySerializer(), new ByteArraySerializer()) {
      @Override
      public synchronized Future<RecordMetadata> send(ProducerRecord<byte[], byte[]> r) {
        Future<RecordMetadata> answered = answer.apply(r);
        return answered != null ? answered : super.send(r);
      }
    };
  }
}
