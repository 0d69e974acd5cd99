package dev.spillway.event;

import dev.spillway.support.Slips;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.streams.StreamsConfig;

/** How Spillway's Kafka clients combine its settings with the configured client properties. */
public final class KafkaClients {
  private KafkaClients() {}

  /**
   * The most bytes Spillway puts in one record's value: Kafka's default largest request and record
   * batch (1 MiB, the producers' {@code max.request.size} and the broker's {@code
   * message.max.bytes}) less room for the key, headers and framing. More would fail the send, and
   * fail again after every restart.
   */
  public static final int MAX_VALUE_BYTES = 1024 * 1024 - 64 * 1024;

  /**
   * How every consumer of Spillway's reads: the Streams applications write in transactions, and
   * what one aborted is written again, so only committed records count.
   */
  public static final String READ_COMMITTED = IsolationLevel.READ_COMMITTED.toString();

  /**
   * Client properties Spillway sets itself, because delivery, its consumer groups, its Streams
   * applications or its topics depend on them; also refused behind a Streams client prefix.
   */
  public static final Set<String> SET_BY_SPILLWAY =
      Set.of(
          "bootstrap.servers",
          "client.id",
          "group.id",
          "transactional.id",
          "acks",
          "enable.idempotence",
          "enable.auto.commit",
          "auto.offset.reset",
          "max.poll.records",
          "isolation.level",
          "application.id",
          "processing.guarantee",
          "commit.interval.ms",
          "state.dir",
          "replication.factor");

  /**
   * Streams exception handlers: one that answers "continue" drops a record its application could
   * not read, process or send, and the rows behind it are then never handled.
   */
  private static final Set<String> DROPPING_HANDLERS =
      Set.of(
          StreamsConfig.DESERIALIZATION_EXCEPTION_HANDLER_CLASS_CONFIG,
          StreamsConfig.DEFAULT_DESERIALIZATION_EXCEPTION_HANDLER_CLASS_CONFIG,
          StreamsConfig.PRODUCTION_EXCEPTION_HANDLER_CLASS_CONFIG,
          StreamsConfig.DEFAULT_PRODUCTION_EXCEPTION_HANDLER_CLASS_CONFIG,
          StreamsConfig.PROCESSING_EXCEPTION_HANDLER_CLASS_CONFIG);

  /** Partitioner settings, which could send one key's records to several partitions. */
  private static final Set<String> PARTITIONING =
      Set.of(
          ProducerConfig.PARTITIONER_CLASS_CONFIG, ProducerConfig.PARTITIONER_IGNORE_KEYS_CONFIG);

  private static final List<String> CLIENT_PREFIXES =
      List.of(
          "main.consumer.",
          "restore.consumer.",
          "global.consumer.",
          "consumer.",
          "producer.",
          "admin.");

  /**
   * Idempotent producers, which every producer of Spillway's is, keep a partition's records in
   * order with at most this many requests in flight; Kafka refuses more.
   */
  private static final int MAX_IN_FLIGHT_IDEMPOTENT = 5;

  /**
   * Why a configured client property cannot go to Spillway's clients, as the rest of a sentence
   * that names it ({@code is set by Spillway itself…}); empty when it can. Besides what Spillway
   * sets, it refuses what would undo that: a consumer group protocol other than the classic one its
   * assignment strategy needs, a static member id its several consumers of a group (and instances
   * sharing one configuration) would share, and producer settings an idempotent producer does not
   * take.
   */
  public static Optional<String> refusal(String property, String value) {
    String name = unprefixed(property);
    if (SET_BY_SPILLWAY.contains(name)) {
      return Optional.of(
          "is set by Spillway itself, since delivery, its consumer groups and its topics depend on"
              + " it; remove it");
    }
    if (DROPPING_HANDLERS.contains(name)) {
      return Optional.of(
          "is Spillway's own: a handler that lets its Streams applications go on past a record"
              + " they could not read, process or send drops that record, and the rows behind it"
              + " are never handled; remove it");
    }
    if (name.equals(StreamsConfig.POLL_MS_CONFIG)) {
      return Optional.of(
          "is Spillway's own: it sets how long a batching stage waits for input from max-wait,"
              + " which bounds how late a batch closes by time; remove it");
    }
    if (PARTITIONING.contains(name)) {
      return Optional.of(
          "is Spillway's own: its records go to partitions by key, which keeps a buffer's events"
              + " (keyed by table) in insert order on one partition, and a batch's retries"
              + " behind it; remove it");
    }
    return switch (name) {
      case ConsumerConfig.GROUP_PROTOCOL_CONFIG ->
          value != null && value.strip().equalsIgnoreCase("classic")
              ? Optional.empty()
              : Optional.of(
                  "must be classic (or left out): Spillway's consumer groups take the classic"
                      + " protocol, which the partition assignment strategy Spillway sets needs");
      case ConsumerConfig.GROUP_INSTANCE_ID_CONFIG ->
          Optional.of(
              "is Spillway's own: its consumers of one group would share this static member id and"
                  + " fence each other out; remove it");
      case ProducerConfig.RETRIES_CONFIG ->
          wholeNumber(value, 1, Integer.MAX_VALUE)
              ? Optional.empty()
              : Optional.of(
                  "must be at least 1, since Spillway's producers are idempotent, not '"
                      + value
                      + "'");
      case ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION ->
          wholeNumber(value, 1, MAX_IN_FLIGHT_IDEMPOTENT)
              ? Optional.empty()
              : Optional.of(
                  "must be between 1 and "
                      + MAX_IN_FLIGHT_IDEMPOTENT
                      + ", since Spillway's producers are idempotent, not '"
                      + value
                      + "'");
      default -> unparsable(name, value);
    };
  }

  /** Every Kafka client's definitions of its settings, which parse and check their values. */
  private static final List<ConfigDef> DEFINITIONS =
      List.of(
          ProducerConfig.configDef(),
          ConsumerConfig.configDef(),
          AdminClientConfig.configDef(),
          StreamsConfig.configDef());

  /** The names of every Kafka client's settings, in order, so a tie is broken alike each run. */
  private static final Set<String> DEFINED =
      DEFINITIONS.stream()
          .flatMap(d -> d.names().stream())
          .collect(java.util.stream.Collectors.toCollection(java.util.TreeSet::new));

  /**
   * Why a client defining this setting would refuse the value when it is built (a duration written
   * {@code 30s} where Kafka counts milliseconds, say), as the client says it; for a setting none of
   * them defines, that it is a slip of one they do, when one is a letter or two away (the clients
   * would pass it over, saying so only at INFO); empty for a value a client takes, or a setting of
   * a plugin's.
   */
  private static Optional<String> unparsable(String name, String value) {
    if (!DEFINED.contains(name)) {
      return Slips.nearest(name, DEFINED)
          .map(
              meant ->
                  SET_BY_SPILLWAY.contains(meant)
                      ? "is no setting of Kafka's clients, and "
                          + meant
                          + ", a letter or two from it, is set by Spillway itself; remove it"
                      : "is no setting of Kafka's clients (did you mean "
                          + meant
                          + "?); Kafka would pass it over");
    }
    for (ConfigDef definitions : DEFINITIONS) {
      ConfigDef.ConfigKey key = definitions.configKeys().get(name);
      if (key == null) {
        continue;
      }
      try {
        Object parsed = ConfigDef.parseType(name, value, key.type);
        if (key.validator != null) {
          key.validator.ensureValid(name, parsed);
        }
      } catch (ConfigException e) {
        return Optional.of("is refused by Kafka: " + e.getMessage());
      }
    }
    return Optional.empty();
  }

  private static boolean wholeNumber(String value, int min, int max) {
    try {
      int n = Integer.parseInt(value.strip());
      return n >= min && n <= max;
    } catch (NumberFormatException e) {
      return false;
    }
  }

  /** The property without a Streams client prefix ({@code producer.}, {@code main.consumer.}…). */
  /** The client setting a property names, without a Streams client prefix ({@code producer.}…). */
  public static String unprefixed(String property) {
    for (String prefix : CLIENT_PREFIXES) {
      if (property.startsWith(prefix)) {
        return property.substring(prefix.length());
      }
    }
    return property;
  }

  /**
   * One client's properties: Spillway's tuning defaults for it, then the configured properties,
   * which may change those, then what Spillway sets itself, which they may not.
   */
  public static Properties properties(
      Map<String, ?> defaults, Map<String, String> configured, Map<String, ?> fixed) {
    Properties p = new Properties();
    p.putAll(defaults);
    p.putAll(configured);
    p.putAll(fixed);
    return p;
  }

  /**
   * A producer of raw records that loses and repeats none once Kafka acknowledged them: every
   * replica in sync took it ({@code acks=all}) and a retried send is written once (idempotence).
   */
  public static Producer<byte[], byte[]> producer(
      Map<String, ?> defaults,
      Map<String, String> configured,
      String bootstrapServers,
      String clientId) {
    Properties p =
        properties(
            defaults,
            configured,
            Map.of(
                ProducerConfig.BOOTSTRAP_SERVERS_CONFIG,
                bootstrapServers,
                ProducerConfig.CLIENT_ID_CONFIG,
                clientId,
                ProducerConfig.ACKS_CONFIG,
                "all",
                ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG,
                true));
    return new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer());
  }
}
