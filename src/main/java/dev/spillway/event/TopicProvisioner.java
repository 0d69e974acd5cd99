package dev.spillway.event;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.config.TopicConfig;
import org.apache.kafka.common.errors.InvalidConfigurationException;
import org.apache.kafka.common.errors.PolicyViolationException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Creates the topics Spillway needs when they are missing; existing topics are left as they are,
 * their settings too.
 */
public final class TopicProvisioner {
  private static final Logger log = LoggerFactory.getLogger(TopicProvisioner.class);

  private static final long LEADER_WAIT_MILLIS = 30_000;

  /** Neither time nor size deletes a record. */
  private static final Map<String, String> KEPT =
      Map.of(TopicConfig.RETENTION_MS_CONFIG, "-1", TopicConfig.RETENTION_BYTES_CONFIG, "-1");

  /**
   * The replicas that must have a record before Kafka acknowledges it to a producer asking all
   * ({@code acks=all}, as Spillway's do), with three replicas or more: the broker's default, one,
   * lets a leader left alone in sync acknowledge what its failure would then lose.
   */
  static final int MIN_IN_SYNC_REPLICAS = 2;

  /**
   * The settings a topic Spillway makes gets for its durability: none below three replicas (two in
   * sync of two would stop every write while a broker is down), else {@link #MIN_IN_SYNC_REPLICAS}.
   */
  public static Map<String, String> durability(short replicationFactor) {
    return replicationFactor >= 3
        ? Map.of(TopicConfig.MIN_IN_SYNC_REPLICAS_CONFIG, Integer.toString(MIN_IN_SYNC_REPLICAS))
        : Map.of();
  }

  /** The settings of a topic Spillway makes: its durability, and for a kept one its retention. */
  static Map<String, String> settings(boolean kept, short replicationFactor) {
    Map<String, String> settings = new TreeMap<>(durability(replicationFactor));
    if (kept) {
      settings.putAll(KEPT);
    }
    return settings;
  }

  /** The settings of the compacted topic of one partition capture keeps its positions in. */
  static Map<String, String> compactedSettings(short replicationFactor) {
    Map<String, String> settings = new TreeMap<>(durability(replicationFactor));
    settings.put(TopicConfig.CLEANUP_POLICY_CONFIG, TopicConfig.CLEANUP_POLICY_COMPACT);
    return settings;
  }

  /** How long Kafka may take to answer before the log says it is waited for. */
  private static final Duration PATIENCE = Duration.ofSeconds(5);

  private TopicProvisioner() {}

  /**
   * Waits until every partition of new topics has a leader: a client that subscribes right after
   * creation (a Streams application checking its source topics) must find them.
   */
  private static void awaitLeaders(Admin admin, List<String> names) throws InterruptedException {
    long deadline = System.currentTimeMillis() + LEADER_WAIT_MILLIS;
    while (true) {
      try {
        boolean ready =
            admin.describeTopics(names).allTopicNames().get().values().stream()
                .flatMap(d -> d.partitions().stream())
                .allMatch(p -> p.leader() != null && !p.leader().isEmpty());
        if (ready) {
          return;
        }
      } catch (ExecutionException e) {
        // Not known to the broker yet: try again.
      }
      if (System.currentTimeMillis() > deadline) {
        throw new IllegalStateException("Topics " + names + " have no leader after 30 s");
      }
      Thread.sleep(50);
    }
  }

  /**
   * Whether the topic exists, asked without creating it.
   *
   * @param clientProperties passed to the admin client as is (security settings and the like)
   */
  public static boolean exists(
      String bootstrapServers, Map<String, String> clientProperties, String topic)
      throws InterruptedException {
    try (Admin admin = admin(bootstrapServers, clientProperties)) {
      return topics(admin, bootstrapServers).contains(topic);
    }
  }

  /**
   * Those of the topics Kafka says it does not have, asked without creating them; none when Kafka
   * gives no answer within {@code wait}, as a topic cannot be told missing then.
   *
   * @param clientProperties passed to the admin client as is (security settings and the like)
   */
  public static List<String> missing(
      String bootstrapServers,
      Map<String, String> clientProperties,
      Collection<String> topics,
      Duration wait)
      throws InterruptedException {
    Admin admin = admin(bootstrapServers, clientProperties);
    try {
      Set<String> existing = admin.listTopics().names().get(wait.toMillis(), TimeUnit.MILLISECONDS);
      return topics.stream().filter(t -> !existing.contains(t)).toList();
    } catch (ExecutionException | TimeoutException e) {
      return List.of();
    } finally {
      admin.close(Duration.ZERO); // a question left unanswered is given up, not waited for
    }
  }

  /**
   * Returns once Kafka answers; says in the log when it keeps the caller waiting, and in one
   * sentence when no broker answers: for a command about to ask it something whose own wait would
   * end in the client's words.
   */
  public static void requireAnswer(String bootstrapServers, Map<String, String> clientProperties)
      throws InterruptedException {
    try (Admin admin = admin(bootstrapServers, clientProperties)) {
      topics(admin, bootstrapServers);
    }
  }

  /**
   * The topics Kafka has; says in the log when Kafka keeps it waiting, and in one sentence when no
   * broker answers (within the admin client's {@code default.api.timeout.ms}, 60 s unless set).
   */
  private static Set<String> topics(Admin admin, String bootstrapServers)
      throws InterruptedException {
    KafkaFuture<Set<String>> names = admin.listTopics().names();
    try {
      try {
        return names.get(PATIENCE.toMillis(), TimeUnit.MILLISECONDS);
      } catch (TimeoutException e) {
        log.info("Waiting for Kafka at {} to answer ...", bootstrapServers);
      }
      return names.get();
    } catch (ExecutionException e) {
      Throwable cause = e.getCause();
      throw new IllegalStateException(
          cause instanceof org.apache.kafka.common.errors.TimeoutException
              ? "Spillway cannot reach Kafka at "
                  + bootstrapServers
                  + ": no broker answered ("
                  + cause.getMessage()
                  + ")"
              : "Could not list topics at " + bootstrapServers + ": " + cause.getMessage(),
          cause);
    }
  }

  private static Admin admin(String bootstrapServers, Map<String, String> clientProperties) {
    Map<String, Object> props = new HashMap<>(clientProperties);
    props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers);
    props.put(AdminClientConfig.CLIENT_ID_CONFIG, "spillway-topics");
    return Admin.create(props);
  }

  /**
   * Creates the missing topics with the broker's default retention.
   *
   * @param clientProperties passed to the admin client as is (security settings and the like)
   */
  public static void ensure(
      String bootstrapServers,
      Map<String, String> clientProperties,
      Collection<String> topics,
      int partitions,
      short replicationFactor)
      throws InterruptedException {
    ensure(bootstrapServers, clientProperties, topics, Set.of(), partitions, replicationFactor);
  }

  /**
   * Creates the missing topics, those of {@code kept} keeping every record until an operator
   * deletes it, whatever the broker's default retention: for dead letters, which may be the only
   * record left of what a pipeline gave up on (a buffer's rows deleted per {@code on-exhausted}),
   * and for the record of their replays, without which a replay would hand them over again. A
   * broker that refuses that (a policy capping retention) gets them with its own, and a warning.
   *
   * @param topics the topics to create with the broker's retention
   * @param kept the topics to create keeping every record
   * @param clientProperties passed to the admin client as is (security settings and the like)
   */
  public static void ensure(
      String bootstrapServers,
      Map<String, String> clientProperties,
      Collection<String> topics,
      Collection<String> kept,
      int partitions,
      short replicationFactor)
      throws InterruptedException {
    try (Admin admin = admin(bootstrapServers, clientProperties)) {
      Set<String> existing = topics(admin, bootstrapServers);
      Set<String> keep = Set.copyOf(kept);
      Set<String> all = new LinkedHashSet<>(topics);
      all.addAll(keep);
      List<NewTopic> missing =
          all.stream()
              .filter(t -> !existing.contains(t))
              .map(
                  t ->
                      new NewTopic(t, Optional.of(partitions), Optional.of(replicationFactor))
                          .configs(settings(keep.contains(t), replicationFactor)))
              .toList();
      if (missing.isEmpty()) {
        return;
      }
      List<String> refused = create(admin, missing);
      if (!refused.isEmpty()) {
        // A managed service capping retention, say: its topics without Spillway's settings still
        // work.
        create(
            admin,
            refused.stream()
                .map(t -> new NewTopic(t, Optional.of(partitions), Optional.of(replicationFactor)))
                .toList());
        Map<String, String> asked = new TreeMap<>();
        missing.stream()
            .filter(t -> refused.contains(t.name()))
            .forEach(t -> asked.putAll(t.configs()));
        log.warn(
            "Kafka refused topics {} with {}; they are created with the broker's settings"
                + " instead{}",
            refused,
            asked,
            refused.stream().anyMatch(keep::contains)
                ? ", so the records of those to keep are deleted once the broker's retention has"
                    + " passed: keep them longer where the broker allows"
                : "");
      }
      awaitLeaders(admin, missing.stream().map(NewTopic::name).toList());
    }
  }

  /**
   * Creates, unless it exists, the compacted topic of one partition where capture (Kafka Connect's
   * offset store) keeps its positions: made here, it gets the durability of Spillway's other
   * topics, which Connect's embedded engine would not give it. A broker refusing that gets it with
   * compaction alone, and a warning.
   */
  public static void ensureCompacted(
      String bootstrapServers,
      Map<String, String> clientProperties,
      String topic,
      short replicationFactor)
      throws InterruptedException {
    try (Admin admin = admin(bootstrapServers, clientProperties)) {
      if (topics(admin, bootstrapServers).contains(topic)) {
        return;
      }
      Map<String, String> asked = compactedSettings(replicationFactor);
      if (!create(admin, List.of(compacted(topic, replicationFactor, asked))).isEmpty()) {
        Map<String, String> compaction = compactedSettings((short) 1);
        if (!create(admin, List.of(compacted(topic, replicationFactor, compaction))).isEmpty()) {
          return; // Connect makes it as it can, or says why not
        }
        log.warn(
            "Kafka refused topic {} with {}; it is created with compaction alone instead",
            topic,
            asked);
      }
      awaitLeaders(admin, List.of(topic));
    }
  }

  private static NewTopic compacted(
      String topic, short replicationFactor, Map<String, String> settings) {
    return new NewTopic(topic, Optional.of(1), Optional.of(replicationFactor)).configs(settings);
  }

  /** Whether the named topic is made with settings of Spillway's (none made: no settings). */
  private static boolean withSettings(List<NewTopic> topics, String name) {
    return topics.stream()
        .anyMatch(t -> t.name().equals(name) && t.configs() != null && !t.configs().isEmpty());
  }

  /**
   * Creates the topics, one another instance made in between counting as made.
   *
   * @return the topics with settings of Spillway's that the broker refused for those settings (a
   *     create-topic policy, a configuration it does not allow), returned rather than failed
   */
  private static List<String> create(Admin admin, List<NewTopic> topics)
      throws InterruptedException {
    List<String> refused = new ArrayList<>();
    for (Map.Entry<String, KafkaFuture<Void>> made :
        admin.createTopics(topics).values().entrySet()) {
      try {
        made.getValue().get();
      } catch (ExecutionException e) {
        Throwable cause = e.getCause();
        if (cause instanceof TopicExistsException) {
          continue;
        }
        if (withSettings(topics, made.getKey())
            && (cause instanceof PolicyViolationException
                || cause instanceof InvalidConfigurationException)) {
          refused.add(made.getKey());
          continue;
        }
        throw new IllegalStateException(
            "Could not create topic " + made.getKey() + ": " + cause.getMessage(), cause);
      }
    }
    return refused;
  }
}
