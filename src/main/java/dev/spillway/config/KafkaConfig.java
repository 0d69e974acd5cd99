package dev.spillway.config;

import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * Which Kafka to use and how Spillway names and sizes its topics.
 *
 * @param bootstrapServers absent: an embedded in-process broker
 * @param topicPrefix first part of every topic name
 * @param partitions of the topics Spillway creates
 * @param replicationFactor of the topics Spillway creates
 * @param properties passed as is to every Kafka client
 */
public record KafkaConfig(
    Optional<String> bootstrapServers,
    String topicPrefix,
    int partitions,
    short replicationFactor,
    Map<String, String> properties) {
  public static final String DEFAULT_TOPIC_PREFIX = "spillway";
  public static final int DEFAULT_PARTITIONS = 6;
  public static final short DEFAULT_REPLICATION_FACTOR = 1;
  private static final Pattern PREFIX = Pattern.compile("[a-zA-Z0-9_-]+");

  public KafkaConfig {
    Objects.requireNonNull(bootstrapServers, "bootstrapServers");
    properties = Map.copyOf(properties);
  }

  public static KafkaConfig embeddedDefaults() {
    return new KafkaConfig(
        Optional.empty(),
        DEFAULT_TOPIC_PREFIX,
        DEFAULT_PARTITIONS,
        DEFAULT_REPLICATION_FACTOR,
        Map.of());
  }

  public boolean embedded() {
    return bootstrapServers.isEmpty();
  }

  static KafkaConfig from(ConfigNode n) {
    Optional<String> bootstrap = n.optionalString("bootstrap-servers");
    if (bootstrap.isPresent() && bootstrap.get().isBlank()) {
      throw n.error("bootstrap-servers", "must name at least one host:port");
    }
    String prefix = n.string("topic-prefix", DEFAULT_TOPIC_PREFIX);
    if (!PREFIX.matcher(prefix).matches()) {
      throw n.error(
          "topic-prefix", "may contain only letters, digits, '_' and '-', not '" + prefix + "'");
    }
    KafkaConfig c =
        new KafkaConfig(
            bootstrap,
            prefix,
            n.integer("partitions", DEFAULT_PARTITIONS, 1, 10_000),
            (short) n.integer("replication-factor", DEFAULT_REPLICATION_FACTOR, 1, 32),
            n.stringMap("properties"));
    n.finish();
    return c;
  }
}
