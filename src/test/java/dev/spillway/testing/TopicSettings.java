package dev.spillway.testing;

import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.common.config.ConfigResource;

/** Changes of a topic's settings, as an operator makes them while Spillway runs. */
public final class TopicSettings {
  private TopicSettings() {}

  /** Sets the largest record batch the topic takes. */
  public static void maxMessageBytes(String bootstrapServers, String topic, String bytes)
      throws Exception {
    try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrapServers))) {
      admin
          .incrementalAlterConfigs(
              Map.of(
                  new ConfigResource(ConfigResource.Type.TOPIC, topic),
                  List.of(
                      new AlterConfigOp(
                          new ConfigEntry("max.message.bytes", bytes), AlterConfigOp.OpType.SET))))
          .all()
          .get();
    }
  }
}
