package dev.spillway.config;

import dev.spillway.event.KafkaClients;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.regex.Pattern;
import org.apache.kafka.common.utils.Utils;

/**
 * Which Kafka to use and how Spillway names and sizes its topics.
 *
 * @param bootstrapServers absent: an embedded in-process broker
 * @param topicPrefix first part of every topic name, {@code [a-zA-Z0-9_-]+}
 * @param partitions of the topics Spillway creates, at least 1
 * @param replicationFactor of the topics Spillway creates, at least 1
 * @param properties given to every Kafka client (security settings and the like) over Spillway's
 *     tuning defaults; none that {@link KafkaClients#refusal} refuses. They may hold secrets, so
 *     only their names are ever logged
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
  static final int MAX_PARTITIONS = 10_000;
  static final int MAX_REPLICATION_FACTOR = 32;
  private static final Pattern PREFIX = Pattern.compile("[a-zA-Z0-9_-]+");

  /**
   * @throws IllegalArgumentException when a value is out of range; the configuration file reports
   *     the same rules with file, line and key before this runs
   */
  public KafkaConfig {
    Objects.requireNonNull(bootstrapServers, "bootstrapServers");
    Objects.requireNonNull(topicPrefix, "topicPrefix");
    if (bootstrapServers.isPresent() && bootstrapServers.get().isBlank()) {
      throw new IllegalArgumentException("bootstrapServers must not be blank");
    }
    if (!PREFIX.matcher(topicPrefix).matches()) {
      throw new IllegalArgumentException("topicPrefix must match " + PREFIX + ": " + topicPrefix);
    }
    if (partitions < 1 || replicationFactor < 1) {
      throw new IllegalArgumentException("partitions and replicationFactor must be at least 1");
    }
    properties.forEach(
        (k, v) ->
            KafkaClients.refusal(k, v)
                .ifPresent(
                    problem -> {
                      throw new IllegalArgumentException("property " + k + " " + problem);
                    }));
    properties = Collections.unmodifiableMap(new LinkedHashMap<>(properties));
  }

  public static KafkaConfig embeddedDefaults() {
    return new KafkaConfig(
        Optional.empty(),
        DEFAULT_TOPIC_PREFIX,
        DEFAULT_PARTITIONS,
        DEFAULT_REPLICATION_FACTOR,
        Map.of());
  }

  /** Whether Spillway runs its own in-process broker. */
  public boolean embedded() {
    return bootstrapServers.isEmpty();
  }

  /** Shows the names of the client properties only; their values often carry credentials. */
  @Override
  public String toString() {
    return "KafkaConfig[bootstrapServers="
        + bootstrapServers.orElse("embedded")
        + ", topicPrefix="
        + topicPrefix
        + ", partitions="
        + partitions
        + ", replicationFactor="
        + replicationFactor
        + ", properties="
        + properties.keySet()
        + "]";
  }

  private static Map<String, String> properties(ConfigNode n) {
    Map<String, String> properties = n.stringMap("properties");
    properties.forEach(
        (k, v) ->
            KafkaClients.refusal(k, v)
                .ifPresent(
                    problem -> {
                      throw n.child("properties")
                          .orElseThrow()
                          .error(
                              k,
                              k.endsWith("bootstrap.servers")
                                  ? "is set by Spillway itself; use kafka.bootstrap-servers"
                                  : problem);
                    }));
    return properties;
  }

  /** The {@code kafka:} section. */
  static KafkaConfig from(ConfigNode n) {
    Optional<String> bootstrap = n.optionalString("bootstrap-servers");
    if (bootstrap.isPresent() && bootstrap.get().isBlank()) {
      throw n.error("bootstrap-servers", "must name at least one host:port");
    }
    bootstrap.ifPresent(
        servers -> {
          for (String server : servers.split(",", -1)) {
            // As Kafka's clients read each one, without asking DNS; they refuse a port out of
            // range only when they start.
            if (Utils.getHost(server.strip()) == null || !portInRange(server.strip())) {
              throw n.error(
                  "bootstrap-servers",
                  "must list host:port pairs such as kafka1:9092,kafka2:9092, not '"
                      + server.strip()
                      + "'");
            }
          }
        });
    String prefix = n.string("topic-prefix", DEFAULT_TOPIC_PREFIX);
    if (!PREFIX.matcher(prefix).matches()) {
      throw n.error(
          "topic-prefix", "may contain only letters, digits, '_' and '-', not '" + prefix + "'");
    }
    int partitions = n.integer("partitions", DEFAULT_PARTITIONS, 1, MAX_PARTITIONS);
    int replicationFactor =
        n.integer("replication-factor", DEFAULT_REPLICATION_FACTOR, 1, MAX_REPLICATION_FACTOR);
    Map<String, String> properties = properties(n);
    n.finish(); // a misspelt bootstrap-servers named, not the checks below its absence fails
    if (bootstrap.isEmpty()) {
      // What else a security setting says is ignored over PLAINTEXT.
      properties.forEach(
          (k, v) -> {
            if (KafkaClients.unprefixed(k).equals("security.protocol")
                && !v.strip().equalsIgnoreCase("PLAINTEXT")) {
              throw n.child("properties")
                  .orElseThrow()
                  .error(
                      k,
                      "is for a Kafka named in kafka.bootstrap-servers, which is not set: the"
                          + " embedded broker takes PLAINTEXT only, not "
                          + v);
            }
          });
    }
    if (bootstrap.isEmpty() && replicationFactor > 1) {
      throw n.error(
          "replication-factor",
          "must be 1 without kafka.bootstrap-servers: the embedded broker is a single node, not "
              + replicationFactor);
    }
    return new KafkaConfig(
        bootstrap.map(String::strip), prefix, partitions, (short) replicationFactor, properties);
  }

  /** Whether {@code server} ends in {@code :port} with a port from 1 to 65535. */
  private static boolean portInRange(String server) {
    try {
      Integer port = Utils.getPort(server);
      return port != null && port >= 1 && port <= 65535;
    } catch (NumberFormatException tooLong) {
      return false;
    }
  }
}
