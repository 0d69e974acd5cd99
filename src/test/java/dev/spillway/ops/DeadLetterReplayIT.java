package dev.spillway.ops;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.tuple;
import static org.awaitility.Awaitility.await;

import dev.spillway.event.CleanupBatch;
import dev.spillway.event.EventSerdes;
import dev.spillway.event.Pipeline;
import dev.spillway.event.TableName;
import dev.spillway.event.Topics;
import dev.spillway.lfk.LfkPipeline;
import dev.spillway.lfk.LooseForeignKey;
import dev.spillway.ops.DeadLetterReplay.Fate;
import dev.spillway.ops.DeadLetterReplay.Letter;
import dev.spillway.ops.DeadLetterReplay.Request;
import dev.spillway.sink.SinkHeaders;
import dev.spillway.testing.EmbeddedInfra;
import dev.spillway.testing.TopicReader;
import dev.spillway.testing.TopicSettings;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Replaying the loose-foreign-key dead-letter topic on the shared embedded Kafka: which dead
 * letters go back to the cleanup batches topic, and with which headers.
 */
class DeadLetterReplayIT {
  private static final Duration TIMEOUT = Duration.ofSeconds(30);

  private String bootstrap;
  private Topics topics;
  private Instant now;

  @BeforeEach
  void topics() throws Exception {
    bootstrap = EmbeddedInfra.get().bootstrapServers();
    topics = new Topics("r" + UUID.randomUUID().toString().substring(0, 8));
    now = Instant.now();
    try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
      admin
          .createTopics(
              List.of(
                  new NewTopic(topics.dlq(Pipeline.LFK), 3, (short) 1),
                  new NewTopic(topics.cleanupBatches(), 2, (short) 1)))
          .all()
          .get();
    }
  }

  /** The parents the replays' configuration defines loose foreign keys of. */
  private static final List<LooseForeignKey> DEFINITIONS =
      List.of(definition("issues", "projects"), definition("app.members", "app.groups"));

  private static LooseForeignKey definition(String child, String parent) {
    return LooseForeignKey.asyncDelete(
        TableName.parse(child), TableName.parse(parent), "parent_id", "");
  }

  private static byte[] batch(String table, String... ids) {
    return EventSerdes.encode(
        new CleanupBatch("main", TableName.parse(table), List.of(ids), 1_000_000L));
  }

  /** A dead letter as the sink writes one, {@code age} ago, on the first partition. */
  private void deadLetter(Duration age, String source, String key, byte[] value) throws Exception {
    deadLetter(0, age, age, source, key, value);
  }

  /**
   * A dead letter on {@code partition} that failed {@code age} ago, with a record time of {@code
   * recordAge} ago (as a dead letter from before its record time was when it failed).
   */
  private void deadLetter(
      int partition, Duration age, Duration recordAge, String source, String key, byte[] value)
      throws Exception {
    deadLetter(partition, age, recordAge, source, key, value, new RecordHeaders());
  }

  /** The same, with these headers too. */
  private void deadLetter(
      int partition,
      Duration age,
      Duration recordAge,
      String source,
      String key,
      byte[] value,
      RecordHeaders h)
      throws Exception {
    h.add("trace", "kept".getBytes());
    SinkHeaders.addFailure(
        h,
        "org.postgresql.util.PSQLException",
        "deadlock detected",
        source,
        now.minus(age).toEpochMilli());
    h.add(SinkHeaders.ATTEMPTS, ByteBuffer.allocate(4).putInt(5).array());
    try (KafkaProducer<byte[], byte[]> producer =
        new KafkaProducer<>(
            Map.of("bootstrap.servers", bootstrap),
            new ByteArraySerializer(),
            new ByteArraySerializer())) {
      producer
          .send(
              new ProducerRecord<>(
                  topics.dlq(Pipeline.LFK),
                  partition,
                  now.minus(recordAge).toEpochMilli(),
                  key == null ? null : key.getBytes(),
                  value,
                  h))
          .get();
    }
  }

  private List<Letter> replay(Instant since, String onlyTable, boolean dryRun) throws Exception {
    return replay(since, onlyTable, dryRun, false);
  }

  private List<Letter> replay(Instant since, String onlyTable, boolean dryRun, boolean again)
      throws Exception {
    return DeadLetterReplay.replay(
        bootstrap,
        Map.of(),
        (short) 1,
        topics.dlq(Pipeline.LFK),
        topics.replays(Pipeline.LFK),
        LfkPipeline.deadLetterBatches(topics, DEFINITIONS),
        new DeadLetterReplay.Request(
            since, onlyTable == null ? t -> true : onlyTable::equals, dryRun, again));
  }

  @Test
  void should_send_batches_back_without_their_failure_and_leave_what_is_no_batch()
      throws Exception {
    String batches = topics.cleanupBatches();
    deadLetter(Duration.ofHours(3), batches + "-1@2", "projects", batch("projects", "1"));
    deadLetter(Duration.ofMinutes(5), batches + "-0@4", "projects", batch("projects", "7", "8"));
    deadLetter(Duration.ofMinutes(4), batches + "-1@9", "groups", batch("app.groups", "3"));
    deadLetter(Duration.ofMinutes(3), batches + "-0@5", "projects", new byte[] {9, 9, 9});
    deadLetter(Duration.ofMinutes(2), topics.deletedRecords() + "-2@40", null, new byte[] {1});
    // A partition holding only dead letters from before --since is not read at all.
    Duration older = Duration.ofHours(2);
    deadLetter(1, older, older, batches + "-1@3", "projects", batch("projects", "9"));

    List<Letter> dry = replay(now.minus(Duration.ofHours(1)), null, true);
    assertThat(dry).extracting(Letter::fate).containsOnly(Fate.WOULD_REPLAY, Fate.LEFT);

    List<Letter> letters = replay(now.minus(Duration.ofHours(1)), "public.projects", false);

    String dlq = topics.dlq(Pipeline.LFK);
    assertThat(letters)
        .extracting(Letter::position, Letter::fate, Letter::entity, Letter::size)
        .containsExactly(
            tuple(dlq + "-0@1", Fate.REPLAYED, "public.projects", 2),
            tuple(dlq + "-0@3", Fate.LEFT, null, 0),
            tuple(dlq + "-0@4", Fate.LEFT, null, 0));
    assertThat(letters.get(0).sentTo()).isEqualTo(batches);
    assertThat(letters.get(0).error()).isEqualTo("PSQLException: deadlock detected");
    assertThat(letters.get(1).left()).startsWith("its batch does not decode");
    assertThat(letters.get(2).left())
        .isEqualTo(
            "not a batch: it failed on " + topics.deletedRecords() + "-2@40, before batching");

    List<ConsumerRecord<byte[], byte[]>> sent =
        TopicReader.readUntil(bootstrap, batches, r -> !r.isEmpty(), TIMEOUT);
    assertThat(sent).hasSize(1);
    ConsumerRecord<byte[], byte[]> r = sent.get(0);
    assertThat(new String(r.key())).isEqualTo("projects");
    assertThat(EventSerdes.decodeCleanupBatch(r.value()).ids()).containsExactly("7", "8");
    assertThat(r.headers())
        .extracting(Header::key)
        .containsExactlyInAnyOrder("trace", SinkHeaders.REPLAYED_FROM);
    assertThat(SinkHeaders.text(r.headers().lastHeader(SinkHeaders.REPLAYED_FROM).value()))
        .isEqualTo(dlq + "-0@1");
    // Nothing more: the dry run sent nothing, the old and the other table's batch stayed.
    assertThat(endOffsets(batches)).isEqualTo(1);
  }

  @Test
  void should_leave_a_batch_whose_parent_no_definition_names_any_more() throws Exception {
    String batches = topics.cleanupBatches();
    deadLetter(Duration.ofMinutes(2), batches + "-0@1", "labels", batch("labels", "4"));
    deadLetter(Duration.ofMinutes(1), batches + "-0@2", "projects", batch("projects", "5"));

    List<Letter> letters = replay(null, null, false);

    String dlq = topics.dlq(Pipeline.LFK);
    assertThat(letters)
        .extracting(Letter::position, Letter::fate, Letter::entity)
        .containsExactly(
            tuple(dlq + "-0@0", Fate.LEFT, "public.labels"),
            tuple(dlq + "-0@1", Fate.REPLAYED, "public.projects"));
    assertThat(letters.get(0).left())
        .isEqualTo(
            "no loose foreign key of this configuration has public.labels as its parent (its"
                + " definitions removed?): handed back, it would clean nothing");
    List<ConsumerRecord<byte[], byte[]>> sent =
        TopicReader.readUntil(bootstrap, batches, r -> !r.isEmpty(), TIMEOUT);
    assertThat(sent).extracting(r -> new String(r.key())).containsExactly("projects");
    assertThat(endOffsets(batches)).as("the labels batch stayed in the dead letters").isEqualTo(1);
    // Asked for by another table, it is not listed (the command refuses one no definition has as
    // parent before reading; CliErrorsTest has that).
    assertThat(replay(null, "public.projects", true))
        .extracting(Letter::entity)
        .containsExactly("public.projects");
  }

  @Test
  void should_send_a_letter_dead_lettered_from_the_delay_topic_to_the_topic_it_returns_to()
      throws Exception {
    String batches = topics.cleanupBatches();
    String delayed = topics.delayed(Pipeline.LFK);
    Duration age = Duration.ofMinutes(1);
    RecordHeaders back = new RecordHeaders();
    back.add(SinkHeaders.BATCHES_TOPIC, SinkHeaders.text(batches));
    deadLetter(0, age, age, delayed + "-0@3", "projects", batch("projects", "4"), back);
    RecordHeaders gone = new RecordHeaders();
    String goneTopic = topics.bufferBatches("removed");
    gone.add(SinkHeaders.BATCHES_TOPIC, SinkHeaders.text(goneTopic));
    deadLetter(0, age, age, delayed + "-0@4", "projects", batch("projects", "5"), gone);
    deadLetter(0, age, age, goneTopic + "-1@7", "projects", batch("projects", "6"));

    List<Letter> letters = replay(null, null, false);

    String dlq = topics.dlq(Pipeline.LFK);
    String left =
        "its batches topic "
            + goneTopic
            + " is not one of this configuration's (its"
            + " buffer left out of it?)";
    assertThat(letters)
        .extracting(Letter::position, Letter::fate, Letter::sentTo, Letter::left)
        .containsExactly(
            tuple(dlq + "-0@0", Fate.REPLAYED, batches, null),
            tuple(dlq + "-0@1", Fate.LEFT, null, left),
            tuple(dlq + "-0@2", Fate.LEFT, null, left));
    List<ConsumerRecord<byte[], byte[]>> sent =
        TopicReader.readUntil(bootstrap, batches, r -> !r.isEmpty(), TIMEOUT);
    assertThat(sent).hasSize(1);
    assertThat(EventSerdes.decodeCleanupBatch(sent.get(0).value()).ids()).containsExactly("4");
  }

  @Test
  void should_leave_a_letter_that_failed_before_since_though_written_after_it() throws Exception {
    String batches = topics.cleanupBatches();
    // Written 10 minutes ago by an instance whose clock ran two hours behind, or sent long after
    // it failed: its record time is after --since, its failure before.
    deadLetter(
        2,
        Duration.ofHours(2),
        Duration.ofMinutes(10),
        batches + "-1@2",
        "projects",
        batch("projects", "1"));
    deadLetter(
        2,
        Duration.ofMinutes(5),
        Duration.ofMinutes(5),
        batches + "-0@4",
        "projects",
        batch("projects", "7"));

    List<Letter> letters = replay(now.minus(Duration.ofHours(1)), null, false);

    assertThat(letters)
        .extracting(Letter::position, Letter::fate)
        .containsExactly(tuple(topics.dlq(Pipeline.LFK) + "-2@1", Fate.REPLAYED));
  }

  @Test
  void should_replay_every_batch_without_since_and_nothing_from_an_empty_topic() throws Exception {
    assertThat(replay(null, null, false)).isEmpty();

    String batches = topics.cleanupBatches();
    deadLetter(Duration.ofDays(2), batches + "-1@2", "projects", batch("projects", "1"));
    deadLetter(Duration.ofMinutes(4), batches + "-1@9", "groups", batch("app.groups", "3"));

    assertThat(replay(null, null, false))
        .extracting(Letter::entity)
        .containsExactly("public.projects", "app.groups");
    assertThat(endOffsets(batches)).isEqualTo(2);
  }

  @Test
  void should_replay_in_the_topic_order_partition_by_partition() throws Exception {
    String batches = topics.cleanupBatches();
    String dlq = topics.dlq(Pipeline.LFK);
    // Written in another order than the topic's, and each partition's letters not in time order.
    // Their record times are a day older than spillway.failed-at, which the listing shows.
    Duration day = Duration.ofDays(1);
    deadLetter(2, minutes(9), minutes(9).plus(day), batches + "-0@1", "a", batch("projects", "1"));
    deadLetter(0, minutes(1), minutes(1).plus(day), batches + "-0@2", "b", batch("projects", "2"));
    deadLetter(1, minutes(8), minutes(8).plus(day), batches + "-0@3", "c", batch("projects", "3"));
    deadLetter(0, minutes(7), minutes(7).plus(day), batches + "-0@4", "d", batch("projects", "4"));
    deadLetter(2, minutes(6), minutes(6).plus(day), batches + "-0@5", "e", batch("projects", "5"));

    List<Letter> letters = replay(null, null, false);

    assertThat(letters)
        .extracting(Letter::position, Letter::failedAt)
        .containsExactly(
            tuple(dlq + "-0@0", failedAt(minutes(1))),
            tuple(dlq + "-0@1", failedAt(minutes(7))),
            tuple(dlq + "-1@0", failedAt(minutes(8))),
            tuple(dlq + "-2@0", failedAt(minutes(9))),
            tuple(dlq + "-2@1", failedAt(minutes(6))));
    List<ConsumerRecord<byte[], byte[]>> sent =
        TopicReader.readUntil(bootstrap, batches, r -> r.size() == 5, TIMEOUT);
    assertThat(sent)
        .extracting(r -> new String(r.key()))
        .as("every batch went back")
        .containsExactlyInAnyOrder("a", "b", "c", "d", "e");
    assertThat(replay(null, null, false))
        .extracting(Letter::fate)
        .as("each recorded as replayed")
        .containsOnly(Fate.REPLAYED_BEFORE)
        .hasSize(5);
  }

  @Test
  void should_skip_what_an_earlier_replay_handed_over_unless_asked_again() throws Exception {
    String batches = topics.cleanupBatches();
    String dlq = topics.dlq(Pipeline.LFK);
    deadLetter(Duration.ofMinutes(5), batches + "-0@4", "projects", batch("projects", "7"));
    assertThat(replay(null, null, false)).extracting(Letter::fate).containsExactly(Fate.REPLAYED);
    Instant firstReplayDone = Instant.now();
    deadLetter(Duration.ofMinutes(1), batches + "-1@6", "groups", batch("app.groups", "3"));

    // The second replay hands over only the new dead letter; the first is listed with its replay.
    List<Letter> second = replay(null, null, false);
    assertThat(second)
        .extracting(Letter::position, Letter::fate, Letter::entity, Letter::size)
        .containsExactly(
            tuple(dlq + "-0@0", Fate.REPLAYED_BEFORE, "public.projects", 1),
            tuple(dlq + "-0@1", Fate.REPLAYED, "app.groups", 1));
    assertThat(second.get(0).left()).isNull();
    assertThat(second.get(0).replayedAt()).isBeforeOrEqualTo(firstReplayDone);
    assertThat(endOffsets(batches)).isEqualTo(2);
    assertThat(replay(null, null, true))
        .extracting(Letter::fate)
        .containsExactly(Fate.REPLAYED_BEFORE, Fate.REPLAYED_BEFORE);

    assertThat(replay(null, "public.projects", false, true))
        .extracting(Letter::fate)
        .containsExactly(Fate.REPLAYED);
    assertThat(endOffsets(batches)).isEqualTo(3);
  }

  @Test
  void should_replay_a_letter_failing_after_the_replay_at_a_position_of_a_deleted_topic()
      throws Exception {
    String batches = topics.cleanupBatches();
    String dlq = topics.dlq(Pipeline.LFK);
    deadLetter(Duration.ofMinutes(5), batches + "-0@4", "projects", batch("projects", "7"));
    assertThat(replay(null, null, false)).extracting(Letter::fate).containsExactly(Fate.REPLAYED);
    // An operator clears the dead letters by deleting the topic; Spillway makes it again.
    try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
      admin.deleteTopics(List.of(dlq)).all().get();
      await()
          .atMost(TIMEOUT)
          .ignoreExceptionsInstanceOf(ExecutionException.class)
          .until(
              () -> {
                admin.createTopics(List.of(new NewTopic(dlq, 3, (short) 1))).all().get();
                return true;
              });
    }
    now = Instant.now();
    deadLetter(Duration.ZERO, batches + "-1@6", "groups", batch("app.groups", "3"));

    assertThat(replay(null, null, false))
        .as("a new letter at the replayed one's position")
        .extracting(Letter::position, Letter::fate, Letter::entity)
        .containsExactly(tuple(dlq + "-0@0", Fate.REPLAYED, "app.groups"));
    assertThat(endOffsets(batches)).isEqualTo(2);
  }

  @Test
  void should_skip_a_letter_replayed_before_though_it_failed_by_a_clock_ahead_of_the_replays()
      throws Exception {
    String batches = topics.cleanupBatches();
    // The sink's clock ten minutes ahead of the one replaying: the letter failed "after" its
    // replay.
    deadLetter(Duration.ofMinutes(-10), batches + "-0@4", "projects", batch("projects", "7"));
    assertThat(replay(null, null, false)).extracting(Letter::fate).containsExactly(Fate.REPLAYED);

    assertThat(replay(null, null, false))
        .extracting(Letter::fate)
        .containsExactly(Fate.REPLAYED_BEFORE);
    assertThat(endOffsets(batches)).isEqualTo(1);
  }

  @Test
  void should_record_nothing_and_say_so_when_kafka_does_not_take_the_batches() throws Exception {
    String batches = topics.cleanupBatches();
    String[] ids =
        java.util.stream.IntStream.range(0, 300).mapToObj(Integer::toString).toArray(String[]::new);
    deadLetter(Duration.ofMinutes(5), batches + "-0@4", "projects", batch("projects", ids));
    TopicSettings.maxMessageBytes(bootstrap, batches, "200"); // the batch is over a kilobyte
    Request all = new Request(null, t -> true, false, false);

    assertThatThrownBy(
            () ->
                DeadLetterReplay.replay(
                    bootstrap,
                    Map.of(),
                    (short) 1,
                    topics.dlq(Pipeline.LFK),
                    topics.replays(Pipeline.LFK),
                    LfkPipeline.deadLetterBatches(topics, DEFINITIONS),
                    all))
        .isInstanceOfSatisfying(
            DeadLetterReplay.IncompleteReplay.class,
            e -> {
              assertThat(e.taken()).isZero();
              assertThat(e.failed()).isEqualTo(1);
              assertThat(e.unrecorded()).isZero();
            });

    // Not recorded as replayed: once the topic takes it, the next replay hands it over.
    TopicSettings.maxMessageBytes(bootstrap, batches, "1048588");
    assertThat(replay(null, null, false)).extracting(Letter::fate).containsExactly(Fate.REPLAYED);
    assertThat(endOffsets(batches)).isEqualTo(1);
  }

  @Test
  void should_leave_a_batch_whose_topic_kafka_does_not_have_and_not_make_it() throws Exception {
    String batches = topics.cleanupBatches();
    deadLetter(Duration.ofMinutes(5), batches + "-0@4", "projects", batch("projects", "7"));
    try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
      admin.deleteTopics(List.of(batches)).all().get();
      await().atMost(TIMEOUT).until(() -> !admin.listTopics().names().get().contains(batches));
    }

    List<Letter> letters = replay(null, null, false);

    assertThat(letters)
        .extracting(Letter::fate, Letter::entity, Letter::sentTo, Letter::left)
        .containsExactly(
            tuple(
                Fate.LEFT,
                "public.projects",
                null,
                "its batches topic "
                    + batches
                    + " is not in Kafka (start run with this configuration, which makes it,"
                    + " then replay)"));
    try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
      assertThat(admin.listTopics().names().get()).doesNotContain(batches);
      // Once run has made it, the next replay hands the batch over.
      await()
          .atMost(TIMEOUT)
          .ignoreExceptions()
          .until(
              () -> {
                admin.createTopics(List.of(new NewTopic(batches, 2, (short) 1))).all().get();
                return true;
              });
    }
    assertThat(replay(null, null, false)).extracting(Letter::fate).containsExactly(Fate.REPLAYED);
    assertThat(endOffsets(batches)).isEqualTo(1);
  }

  private static Duration minutes(long n) {
    return Duration.ofMinutes(n);
  }

  /** The time a dead letter written {@code age} ago says it failed, to the millisecond. */
  private Instant failedAt(Duration age) {
    return Instant.ofEpochMilli(now.minus(age).toEpochMilli());
  }

  private long endOffsets(String topic) throws Exception {
    try (KafkaConsumer<byte[], byte[]> consumer =
        new KafkaConsumer<>(
            Map.of("bootstrap.servers", bootstrap),
            new ByteArrayDeserializer(),
            new ByteArrayDeserializer())) {
      List<TopicPartition> partitions =
          consumer.partitionsFor(topic).stream()
              .map(p -> new TopicPartition(topic, p.partition()))
              .toList();
      return consumer.endOffsets(partitions).values().stream().mapToLong(Long::longValue).sum();
    }
  }
}
