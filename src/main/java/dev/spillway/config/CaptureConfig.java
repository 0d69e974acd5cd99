package dev.spillway.config;

import dev.spillway.capture.CaptureSettings;
import java.time.Duration;

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

  public static CaptureConfig defaults() {
    return new CaptureConfig(
        DEFAULT_POLL_INTERVAL,
        DEFAULT_HEARTBEAT_INTERVAL,
        DEFAULT_MAX_BATCH_SIZE,
        DEFAULT_OFFSET_FLUSH_INTERVAL);
  }

  static CaptureConfig from(ConfigNode n) {
    CaptureConfig c =
        new CaptureConfig(
            positive(n, "poll-interval", DEFAULT_POLL_INTERVAL),
            positive(n, "heartbeat-interval", DEFAULT_HEARTBEAT_INTERVAL),
            n.integer("max-batch-size", DEFAULT_MAX_BATCH_SIZE, 1, 1_000_000),
            positive(n, "offset-flush-interval", DEFAULT_OFFSET_FLUSH_INTERVAL));
    n.finish();
    return c;
  }

  private static Duration positive(ConfigNode n, String key, Duration dflt) {
    Duration d = n.duration(key, dflt);
    if (d.isZero() || d.isNegative()) {
      throw n.error(key, "must be longer than zero");
    }
    return d;
  }
}
