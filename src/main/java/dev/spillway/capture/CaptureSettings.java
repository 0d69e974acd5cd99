package dev.spillway.capture;

import dev.spillway.event.Topics;
import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * How capture talks to Kafka and paces Debezium.
 *
 * @param bootstrapServers Kafka to publish to and keep source offsets in
 * @param topics topic names (offsets go to {@link Topics#captureOffsets()})
 * @param partitions of the topics capture creates
 * @param replicationFactor of the topics capture creates, the offsets topic included
 * @param kafkaProperties passed as is to every Kafka client (security settings and the like)
 * @param pollInterval how long Debezium waits for more changes before handing over a batch
 * @param heartbeatInterval how often an idle source still moves its slot forward
 * @param maxBatchSize most changes handed over at once
 * @param offsetFlushInterval how often acknowledged positions are stored and confirmed to the slot
 */
public record CaptureSettings(
    String bootstrapServers,
    Topics topics,
    int partitions,
    short replicationFactor,
    Map<String, String> kafkaProperties,
    Duration pollInterval,
    Duration heartbeatInterval,
    int maxBatchSize,
    Duration offsetFlushInterval) {
  public static final Duration DEFAULT_POLL_INTERVAL = Duration.ofMillis(10);
  public static final Duration DEFAULT_HEARTBEAT_INTERVAL = Duration.ofSeconds(10);
  public static final int DEFAULT_MAX_BATCH_SIZE = 2048;
  public static final Duration DEFAULT_OFFSET_FLUSH_INTERVAL = Duration.ofSeconds(1);

  public CaptureSettings {
    Objects.requireNonNull(bootstrapServers, "bootstrapServers");
    Objects.requireNonNull(topics, "topics");
    kafkaProperties = Map.copyOf(kafkaProperties);
  }

  /** Replication slot and publication name for one database: lower-case, [a-z0-9_]. */
  public String slotName(String database) {
    return slotName(topics.prefix(), database);
  }

  /** The replication slot (and publication) of a database under a topic prefix. */
  public static String slotName(String topicPrefix, String database) {
    return (topicPrefix + "_" + database).toLowerCase(Locale.ROOT).replaceAll("[^a-z0-9_]", "_");
  }

  /** PostgreSQL's longest identifier; a longer slot name is refused, a publication's cut short. */
  public static final int MAX_NAME_LENGTH = 63;

  /**
   * Why the slot (and publication) name of a database under a topic prefix is one PostgreSQL would
   * not take whole, as the rest of a sentence naming the prefix or the database; empty when it
   * would take it.
   */
  public static Optional<String> overlongSlotName(String topicPrefix, String database) {
    return overlong(slotName(topicPrefix, database), database);
  }

  private static Optional<String> overlong(String name, String database) {
    return name.length() <= MAX_NAME_LENGTH
        ? Optional.empty()
        : Optional.of(
            String.format(
                "would name the replication slot and publication of database %s %s, %d characters"
                    + " where PostgreSQL takes at most %d; shorten kafka.topic-prefix or the"
                    + " database's name",
                database, name, name.length(), MAX_NAME_LENGTH));
  }

  /**
   * Refuses, in one sentence, databases whose slot and publication name PostgreSQL would not take
   * whole, or that two of them would share (names differing only in case or punctuation).
   *
   * @throws CaptureSetupException naming the database(s)
   */
  public void checkSlotNames(Collection<String> databases) {
    Map<String, String> byName = new HashMap<>();
    for (String database : databases) {
      String name = slotName(database);
      overlong(name, database)
          .ifPresent(
              problem -> {
                throw new CaptureSetupException("kafka.topic-prefix " + problem + ".");
              });
      String other = byName.putIfAbsent(name, database);
      if (other != null) {
        throw new CaptureSetupException(
            String.format(
                "Databases %s and %s would share the replication slot and publication %s; rename"
                    + " one of them under databases:.",
                other, database, name));
      }
    }
  }
}
