package dev.spillway.lfk;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.tuple;

import dev.spillway.event.CleanupBatch;
import dev.spillway.event.EventSerdes;
import dev.spillway.event.Pipeline;
import dev.spillway.event.TableName;
import dev.spillway.event.Topics;
import dev.spillway.ops.DeadLetterReplay;
import dev.spillway.sink.SinkHeaders;
import dev.spillway.testing.EmbeddedInfra;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.stream.IntStream;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.Test;

/**
 * The backlog counts the deleted rows of dead-lettered cleanup batches apart from those pending,
 * until a replay hands them back.
 */
class DeadLetteredBacklogIT {
  private final String bootstrap = EmbeddedInfra.get().bootstrapServers();
  private final Topics topics =
      new Topics("dl" + UUID.randomUUID().toString().replace("-", "").substring(0, 10));
  private final Instant now = Instant.now();

  /** The configuration's: parents projects and builds, not labels. */
  private static final List<LooseForeignKey> DEFINITIONS =
      List.of(
          LooseForeignKey.asyncDelete(
              TableName.parse("issues"), TableName.parse("projects"), "project_id", ""),
          LooseForeignKey.asyncDelete(
              TableName.parse("ci.jobs"), TableName.parse("builds"), "build_id", ""));

  @Test
  void should_count_dead_lettered_rows_per_parent_until_a_replay_hands_them_back()
      throws Exception {
    try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
      admin
          .createTopics(
              List.of(
                  new NewTopic(topics.dlq(Pipeline.LFK), 1, (short) 1),
                  new NewTopic(topics.cleanupBatches(), 1, (short) 1)))
          .all()
          .get();
    }
    String batchSource = SinkHeaders.position(topics.cleanupBatches(), 0, 7);
    deadLetter(Duration.ofMinutes(10), batchSource, batch("main", "public.projects", 3));
    deadLetter(Duration.ofMinutes(10), batchSource, batch("ci", "public.builds", 2));
    deadLetter(
        Duration.ofMinutes(10),
        SinkHeaders.position(topics.deletedRecords(), 0, 3),
        "not a batch".getBytes());
    deadLetter(Duration.ofMinutes(1), batchSource, batch("main", "public.projects", 4));
    // A parent no definition has (its definitions removed): replay lfk leaves its letter.
    deadLetter(Duration.ofMinutes(10), batchSource, batch("main", "public.labels", 5));

    assertThat(backlog())
        .containsExactly(
            tuple("ci", "public.builds", 0L, 2L), tuple("main", "public.projects", 0L, 7L));

    // The replay of the last letter hands its batch back: pending now, no longer dead-lettered.
    List<DeadLetterReplay.Letter> replayed =
        DeadLetterReplay.replay(
            bootstrap,
            Map.of(),
            (short) 1,
            topics.dlq(Pipeline.LFK),
            topics.replays(Pipeline.LFK),
            LfkPipeline.deadLetterBatches(topics, DEFINITIONS),
            new DeadLetterReplay.Request(
                now.minus(Duration.ofMinutes(5)), "public.projects"::equals, false, false));
    assertThat(replayed)
        .extracting(DeadLetterReplay.Letter::size, DeadLetterReplay.Letter::fate)
        .containsExactly(tuple(4, DeadLetterReplay.Fate.REPLAYED));

    assertThat(backlog())
        .containsExactly(
            tuple("ci", "public.builds", 0L, 2L), tuple("main", "public.projects", 4L, 3L));
  }

  /** Each parent's database, table, pending and dead-lettered rows. */
  private List<org.assertj.core.groups.Tuple> backlog() throws InterruptedException {
    return LfkBacklog.read(bootstrap, Map.of(), topics, DEFINITIONS).stream()
        .map(p -> tuple(p.database(), p.table(), p.pending(), p.deadLettered()))
        .toList();
  }

  private static byte[] batch(String database, String table, int rows) {
    List<String> ids = IntStream.rangeClosed(1, rows).mapToObj(Integer::toString).toList();
    return EventSerdes.encode(new CleanupBatch(database, TableName.parse(table), ids, 1_000_000L));
  }

  /** A dead letter as the sink writes one, dead-lettered {@code age} ago. */
  private void deadLetter(Duration age, String source, byte[] value) throws Exception {
    RecordHeaders h = new RecordHeaders();
    long failedAt = now.minus(age).toEpochMilli();
    SinkHeaders.addFailure(h, "java.sql.SQLException", "statement timeout", source, failedAt);
    try (KafkaProducer<byte[], byte[]> producer =
        new KafkaProducer<>(
            Map.of("bootstrap.servers", bootstrap),
            new ByteArraySerializer(),
            new ByteArraySerializer())) {
      producer
          .send(new ProducerRecord<>(topics.dlq(Pipeline.LFK), 0, failedAt, null, value, h))
          .get();
    }
  }
}
