package dev.spillway.event;

import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

/** How Spillway's Kafka clients combine its settings with the configured client properties. */
public final class KafkaClients {
  private KafkaClients() {}

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
}
