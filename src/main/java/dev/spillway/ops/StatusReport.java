package dev.spillway.ops;

import java.time.Instant;
import java.util.List;

/**
 * What a running Spillway process reports at {@code GET /api/status} and {@code status --json}.
 * Field names are part of the contract scripts rely on. {@code captureStarting} is true until the
 * process has set its capture up (its slots and publications), or found nothing to capture. {@code
 * madeAt} is when the report was made: the endpoint answers with the last one made while another is
 * being made.
 */
public record StatusReport(
    long pid,
    String startedAt,
    KafkaStatus kafka,
    List<DatabaseStatus> databases,
    List<CaptureCount> capture,
    boolean captureStarting,
    List<HealthStatus> health,
    List<SinkStatus> sinks,
    List<BufferStatus> buffers,
    String lagReadAt,
    List<LagStatus> lag,
    String failure,
    String madeAt) {

  /**
   * A list a process of another version leaves out (an older one reports no {@code health} or
   * {@code sinks}, say) reads as empty, so the report renders all the same.
   */
  public StatusReport {
    databases = orEmpty(databases);
    capture = orEmpty(capture);
    health = orEmpty(health);
    sinks = orEmpty(sinks);
    buffers = orEmpty(buffers);
    lag = orEmpty(lag);
  }

  private static <T> List<T> orEmpty(List<T> list) {
    return list == null ? List.of() : list;
  }

  /** This report with {@code failure} as the process's failure (null for none). */
  public StatusReport withFailure(String failure) {
    return new StatusReport(
        pid,
        startedAt,
        kafka,
        databases,
        capture,
        captureStarting,
        health,
        sinks,
        buffers,
        lagReadAt,
        lag,
        failure,
        madeAt);
  }

  public record KafkaStatus(String bootstrapServers, boolean embedded) {}

  /**
   * One consumer group on one topic, as {@code status --json} and {@code lag --json} show it.
   *
   * @param lag records the group has not committed yet
   * @param oldestWaitingSince when the oldest of them was written (an ISO-8601 instant); null when
   *     none waits or it could not be read
   * @param oldestWaitingSeconds how long it had waited when the lag was read, never negative
   * @param members consumers in the group then
   */
  public record LagStatus(
      String group,
      String topic,
      int partitions,
      long lag,
      String oldestWaitingSince,
      Long oldestWaitingSeconds,
      int members) {

    /** {@code l} as read at {@code readAt}. */
    public static LagStatus of(ConsumerLag.Lag l, Instant readAt) {
      Long written = l.oldestWaitingMillis();
      return new LagStatus(
          l.group(),
          l.topic(),
          l.partitions(),
          l.lag(),
          written == null ? null : Instant.ofEpochMilli(written).toString(),
          written == null ? null : l.waitedMillis(readAt.toEpochMilli()) / 1000,
          l.members());
    }
  }

  /**
   * @param error why slots could not be read, or null
   * @param kafkaWait the batch of changes captured from the database that has waited 10 s or more
   *     for Kafka to take it, or null
   * @param captureStandingBySince since when this process stands by while the database's slot
   *     streams to another instance, or null
   */
  public record DatabaseStatus(
      String name,
      String url,
      boolean embedded,
      List<SlotStatus> slots,
      String error,
      KafkaWait kafkaWait,
      String captureStandingBySince) {

    public DatabaseStatus {
      slots = orEmpty(slots);
    }
  }

  /**
   * @param since when capture handed the batch to Kafka
   * @param reason what Kafka last answered (the batch is sent again until it takes it), or null
   *     when it has not answered yet
   */
  public record KafkaWait(String since, String reason) {}

  /**
   * @param ours whether it is this installation's slot for the database ({@code <prefix>_<db>}); a
   *     database's other logical slots (another installation's, another tool's) hold WAL too
   * @param safeWalBytes WAL that may still be written before the server invalidates the slot, or
   *     null when the server sets no limit
   * @param invalidated why the server invalidated the slot, or null
   */
  public record SlotStatus(
      String slot,
      boolean ours,
      boolean active,
      long walHeldBytes,
      Long safeWalBytes,
      String invalidated) {}

  public record CaptureCount(String database, String table, String operation, long changes) {}

  /**
   * @param table null for the database as a whole
   * @param state NORMAL, THROTTLE, UNKNOWN or STOP
   * @param reason the indicator and what it saw; empty when NORMAL
   */
  public record HealthStatus(String database, String table, String state, String reason) {}

  public record SinkStatus(
      String pipeline,
      long rows,
      long requeued,
      long delayed,
      long deadLettered,
      int pausedPartitions) {}

  /**
   * One buffer table.
   *
   * @param rowsWaiting rows in the buffer table now, or -1 when it could not be counted
   * @param batchesInFlight batches being run: their handler called, or waiting for a call
   * @param deadLetteredBatches batches whose remaining events went to the dead-letter topic since
   *     start
   * @param tooLargeRows rows capture found too large for one Kafka record since start: their keys
   *     went to the dead-letter topic, the rows stay in the table
   * @param unreadableEvents captured events the batching stage could not read since start, sent to
   *     the dead-letter topic
   * @param republishedEvents inserts capture published a second time (a take-over) that this
   *     instance's batching stage passed over since start
   * @param insertToHandledP50Millis from the inserting commit to the row's deletion, over the last
   *     two minutes; null when no row was timed in the last 80 s (replayed rows are not)
   */
  public record BufferStatus(
      String name,
      String database,
      String table,
      long rowsWaiting,
      int batchesInFlight,
      long handledEvents,
      long deadLetteredBatches,
      long deadLetteredEvents,
      long tooLargeRows,
      long unreadableEvents,
      long republishedEvents,
      Double insertToHandledP50Millis,
      Double insertToHandledP99Millis) {}
}
