package dev.spillway.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.spillway.event.CleanupBatch;
import dev.spillway.event.EventSerdes;
import dev.spillway.event.Pipeline;
import dev.spillway.event.TableName;
import dev.spillway.event.Topics;
import dev.spillway.sink.SinkHeaders;
import dev.spillway.testing.Cli;
import dev.spillway.testing.EmbeddedInfra;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code replay lfk} stopped part-way by SIGTERM (as Ctrl+C stops it), in a JVM of its own. */
class ReplaySignalIT {
  /** Enough dead letters that the replay is still reading them when the signal comes. */
  private static final int LETTERS = 300_000;

  @TempDir Path dir;
  private final String bootstrap = EmbeddedInfra.get().bootstrapServers();

  @Test
  void should_record_what_it_handed_over_when_stopped_by_a_signal() throws Exception {
    Topics topics = deadLetteredTopics();
    Path log = dir.resolve("replay.log");

    Process replay = replay(topics, log);
    terminateOnceHandingOver(replay, topics);

    long handed = endOffset(topics.cleanupBatches());
    assertThat(handed).as("batches handed over before the signal").isBetween(1L, LETTERS - 1L);
    assertThat(endOffset(topics.replays(Pipeline.LFK)))
        .as("each batch handed over recorded as replayed")
        .isEqualTo(handed);
    assertThat(Files.readString(log))
        .as("saying so")
        .contains(
            "Replay stopped before the end of "
                + topics.dlq(Pipeline.LFK)
                + ": "
                + (handed == 1 ? "1 batch" : handed + " batches")
                + " handed over and recorded as replayed, so replaying again hands over"
                + " the rest.");
  }

  @Test
  void should_record_batches_as_kafka_takes_them_so_a_killed_replay_hands_over_few_again()
      throws Exception {
    Topics topics = deadLetteredTopics();
    String replays = topics.replays(Pipeline.LFK);

    Process replay = replay(topics, dir.resolve("killed.log"));
    try {
      await()
          .atMost(Duration.ofSeconds(120))
          .pollInterval(Duration.ofMillis(10))
          .alias("the replay's first batches recorded")
          .until(() -> !replay.isAlive() || endOffset(replays) > 0);
      assertThat(replay.isAlive()).as("recorded while it still replays").isTrue();
      replay.destroyForcibly(); // SIGKILL: nothing more is recorded
      assertThat(replay.waitFor(60, TimeUnit.SECONDS)).as("the replay was killed").isTrue();
    } finally {
      replay.destroyForcibly();
    }

    long handed = endOffset(topics.cleanupBatches());
    assertThat(handed).as("batches handed over before the kill").isLessThan(LETTERS);
    assertThat(endOffset(replays))
        .as("recorded as replayed: some, none not handed over")
        .isBetween(1L, handed);
  }

  @Test
  void should_say_which_batches_kafka_left_unanswered_when_stopped_waiting_for_its_answers()
      throws Exception {
    Topics topics = deadLetteredTopics();
    Path log = dir.resolve("unanswered.log");

    // The producer holds a batch that is not full for a minute before it sends it (linger), so
    // the last batches sent and records of replays stay unanswered past the signal's hold.
    Process replay = replay(topics, log, Map.of("linger.ms", "60000"));
    terminateOnceHandingOver(replay, topics);

    String printed = Files.readString(log);
    Matcher said =
        Pattern.compile(
                "Replay stopped before the end of "
                    + Pattern.quote(topics.dlq(Pipeline.LFK))
                    + ": (?:no batch recorded as replayed|(\\d+) batch(?:es)? handed over and recorded"
                    + " as replayed); (\\d+) batch(?:es)?"
                    + " sent (?:is|are) not recorded as replayed \\(Kafka did not answer within 20 s,"
                    + " or refused (?:its|their) record\\), so"
                    + " replaying again hands over the rest and may hand (?:that one|those) over"
                    + " twice, with the same group ids\\.")
            .matcher(printed);
    assertThat(said.find())
        .as("saying what it sent without an answer, before the JVM exits: %s", printed)
        .isTrue();
    // None when the signal came before Kafka answered on a record of a replay.
    long recorded = said.group(1) == null ? 0 : Long.parseLong(said.group(1));
    long unanswered = Long.parseLong(said.group(2));
    assertThat(unanswered).as("sent without an answer").isPositive();
    assertThat(endOffset(topics.replays(Pipeline.LFK)))
        .as("recorded as replayed, as it says")
        .isEqualTo(recorded);
    assertThat(endOffset(topics.cleanupBatches()))
        .as("handed over: those recorded, and perhaps some it had no answer on")
        .isBetween(recorded, recorded + unanswered);
  }

  /** Sends SIGTERM (as Ctrl+C does) to the replay once its first batches are handed over. */
  private void terminateOnceHandingOver(Process replay, Topics topics) throws Exception {
    try {
      await()
          .atMost(Duration.ofSeconds(120))
          .pollInterval(Duration.ofMillis(10))
          .alias("the replay's first batches handed over")
          .until(() -> !replay.isAlive() || endOffset(topics.cleanupBatches()) > 0);
      replay.destroy(); // SIGTERM
      assertThat(replay.waitFor(60, TimeUnit.SECONDS)).as("the replay exited").isTrue();
    } finally {
      replay.destroyForcibly();
    }
  }

  /**
   * A loose-foreign-key dead-letter topic holding {@link #LETTERS} cleanup batches, and the batches
   * topic they go back to, under a topic prefix of their own.
   */
  private Topics deadLetteredTopics() throws Exception {
    Topics topics = new Topics("s" + UUID.randomUUID().toString().substring(0, 8));
    String dlq = topics.dlq(Pipeline.LFK);
    String batches = topics.cleanupBatches();
    try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
      admin
          .createTopics(
              List.of(new NewTopic(dlq, 1, (short) 1), new NewTopic(batches, 1, (short) 1)))
          .all()
          .get();
    }
    deadLetters(dlq, batches);
    return topics;
  }

  /**
   * {@code replay lfk} of {@code topics}' dead letters in a JVM of its own, printing to {@code
   * log}.
   */
  private Process replay(Topics topics, Path log) throws Exception {
    return replay(topics, log, Map.of());
  }

  /** The same with these {@code kafka.properties}. */
  private Process replay(Topics topics, Path log, Map<String, String> kafkaProperties)
      throws Exception {
    Path config = dir.resolve("spillway.yml");
    StringBuilder properties = new StringBuilder();
    kafkaProperties.forEach(
        (name, value) -> properties.append("\n    ").append(name).append(": ").append(value));
    Files.writeString(
        config,
        """
        working-dir: wd
        kafka:
          bootstrap-servers: %s
          topic-prefix: %s
          properties:%s
        loose-foreign-keys:
          definitions:
            children:
              - { table: parents, column: parent_id, on_delete: async_delete }
        """
            .formatted(bootstrap, topics.prefix(), properties.isEmpty() ? " {}" : properties));
    return Cli.process(
            ProcessBuilder.Redirect.to(log.toFile()), "replay", "lfk", "-c", config.toString())
        .start();
  }

  /** {@link #LETTERS} dead-lettered cleanup batches of {@code parents}, one row each. */
  private void deadLetters(String dlq, String batches) throws Exception {
    long failedAt = Instant.now().toEpochMilli();
    try (KafkaProducer<byte[], byte[]> producer =
        new KafkaProducer<>(
            Map.of("bootstrap.servers", bootstrap, "linger.ms", "20"),
            new ByteArraySerializer(),
            new ByteArraySerializer())) {
      for (int i = 0; i < LETTERS; i++) {
        RecordHeaders h = new RecordHeaders();
        SinkHeaders.addFailure(
            h,
            "org.postgresql.util.PSQLException",
            "deadlock detected",
            batches + "-0@" + i,
            failedAt);
        byte[] batch =
            EventSerdes.encode(
                new CleanupBatch(
                    "main", TableName.parse("parents"), List.of(Integer.toString(i)), failedAt));
        producer.send(new ProducerRecord<>(dlq, 0, null, "parents".getBytes(), batch, h));
      }
      producer.flush();
    }
  }

  private long endOffset(String topic) {
    try (KafkaConsumer<byte[], byte[]> consumer =
        new KafkaConsumer<>(
            Map.of("bootstrap.servers", bootstrap),
            new ByteArrayDeserializer(),
            new ByteArrayDeserializer())) {
      TopicPartition tp = new TopicPartition(topic, 0);
      try {
        return consumer.endOffsets(List.of(tp), Duration.ofSeconds(2)).getOrDefault(tp, 0L);
      } catch (org.apache.kafka.common.errors.TimeoutException e) {
        return 0; // not made yet: the replay makes its replays topic before its first batch
      }
    }
  }
}
