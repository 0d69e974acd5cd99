package dev.spillway.config;

import dev.spillway.capture.CaptureSettings;
import java.time.Duration;
import java.util.Objects;

/**
 * Pacing of change capture.
 *
 * @param pollInterval how long Debezium waits for more changes before handing a batch over
 * @param heartbeatInterval how often an idle source still moves its slot forward
 * @param maxBatchSize most changes handed over at once
 * @param offsetFlushInterval how often acknowledged positions are confirmed to the slot
 */
public record CaptureConfig(
    Duration pollInterval,
    Duration heartbeatInterval,
    int maxBatchSize,
    Duration offsetFlushInterval) {
  // Capture owns its defaults; the configuration only reads overrides.
  public static final Duration DEFAULT_POLL_INTERVAL = CaptureSettings.DEFAULT_POLL_INTERVAL;
  public static final Duration DEFAULT_HEARTBEAT_INTERVAL =
      CaptureSettings.DEFAULT_HEARTBEAT_INTERVAL;
  public static final int DEFAULT_MAX_BATCH_SIZE = CaptureSettings.DEFAULT_MAX_BATCH_SIZE;
  public static final Duration DEFAULT_OFFSET_FLUSH_INTERVAL =
      CaptureSettings.DEFAULT_OFFSET_FLUSH_INTERVAL;
  static final int MAX_BATCH_SIZE = 1_000_000;

  /**
   * Longer, the slot would hold WAL that long whatever capture reads, and a take-over publish again
   * more than the batching stage's repeat window passes over.
   */
  static final Duration MAX_OFFSET_FLUSH_INTERVAL = Duration.ofMinutes(1);

  /**
   * @throws IllegalArgumentException when a duration is not positive or the batch size is outside
   *     1..1,000,000
   */
  public CaptureConfig {
    positive(pollInterval, "pollInterval");
    positive(heartbeatInterval, "heartbeatInterval");
    positive(offsetFlushInterval, "offsetFlushInterval");
    if (maxBatchSize < 1 || maxBatchSize > MAX_BATCH_SIZE) {
      throw new IllegalArgumentException("maxBatchSize must be between 1 and " + MAX_BATCH_SIZE);
    }
  }

  public static CaptureConfig defaults() {
    return new CaptureConfig(
        DEFAULT_POLL_INTERVAL,
        DEFAULT_HEARTBEAT_INTERVAL,
        DEFAULT_MAX_BATCH_SIZE,
        DEFAULT_OFFSET_FLUSH_INTERVAL);
  }

  /** The {@code capture:} section. */
  static CaptureConfig from(ConfigNode n) {
    CaptureConfig c =
        new CaptureConfig(
            n.positiveIntMillis("poll-interval", DEFAULT_POLL_INTERVAL),
            n.positiveIntMillis("heartbeat-interval", DEFAULT_HEARTBEAT_INTERVAL),
            n.integer("max-batch-size", DEFAULT_MAX_BATCH_SIZE, 1, MAX_BATCH_SIZE),
            n.positiveDuration(
                "offset-flush-interval",
                DEFAULT_OFFSET_FLUSH_INTERVAL,
                MAX_OFFSET_FLUSH_INTERVAL,
                "(the slot keeps the WAL since the last position stored, and a take-over"
                    + " publishes again what came after it)"));
    n.finish();
    return c;
  }

  private static void positive(Duration d, String name) {
    Objects.requireNonNull(d, name);
    if (d.isNegative() || d.isZero()) {
      throw new IllegalArgumentException(name + " must be longer than zero: " + d);
    }
  }
}
