package dev.spillway.event;

import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.serialization.ByteArraySerializer;

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

  private static final List<String> CLIENT_PREFIXES =
      List.of(
          "main.consumer.",
          "restore.consumer.",
          "global.consumer.",
          "consumer.",
          "producer.",
          "admin.");

  /** Whether Spillway sets this client property itself, also behind a Streams client prefix. */
  public static boolean setBySpillway(String property) {
    String name = property;
    for (String prefix : CLIENT_PREFIXES) {
      if (name.startsWith(prefix)) {
        name = name.substring(prefix.length());
        break;
      }
    }
    return SET_BY_SPILLWAY.contains(name);
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
