package dev.spillway.ops;

import java.util.List;

/**
 * What a running Spillway process reports at {@code GET /api/status} and {@code status --json}.
 * Field names are part of the contract scripts rely on.
 */
public record StatusReport(
    long pid,
    String startedAt,
    KafkaStatus kafka,
    List<DatabaseStatus> databases,
    List<CaptureCount> capture,
    String failure) {

  public record KafkaStatus(String bootstrapServers, boolean embedded) {}

  /**
   * @param error why slots could not be read, or null
   */
  public record DatabaseStatus(
      String name, String url, boolean embedded, List<SlotStatus> slots, String error) {}

  public record SlotStatus(String slot, boolean active, long walHeldBytes) {}

  public record CaptureCount(String database, String table, String operation, long changes) {}
}
