package dev.spillway.config;

import dev.spillway.sink.SinkSettings;

/**
 * A {@code sink:} section: how batches are claimed and run. The top-level one sets defaults for
 * every pipeline; a pipeline's own {@code sink:} overrides single keys.
 */
public final class SinkSection {
  private SinkSection() {}

  public static SinkSettings from(ConfigNode n, SinkSettings base) {
    SinkSettings s =
        new SinkSettings(
            n.integer("consumers", base.consumers(), 1, 256),
            n.integer("max-in-flight", base.maxInFlight(), 1, 256),
            n.integer("max-attempts", base.maxAttempts(), 1, 1000),
            n.positiveDuration("consume-after", base.consumeAfter()),
            n.integer("max-retries", base.maxRetries(), 0, 1000),
            n.positiveDuration("retry-backoff", base.retryBackoff()),
            n.positiveDuration("retry-backoff-max", base.retryBackoffMax()),
            n.integer(
                "max-rows-per-run",
                (int) Math.min(Integer.MAX_VALUE, base.maxRowsPerRun()),
                1,
                Integer.MAX_VALUE),
            n.positiveDuration("max-runtime-per-run", base.maxRuntimePerRun()),
            n.duration("sub-batch-pause", base.subBatchPause()),
            n.duration("throttle-pause", base.throttlePause()),
            n.decimal("throttle-factor", base.throttleFactor(), 0.01, 1),
            n.integer("sub-batch-floor", base.subBatchFloor(), 1, 1_000_000),
            n.positiveDuration("poll-timeout", base.pollTimeout()),
            n.duration("shutdown-grace", base.shutdownGrace()),
            n.duration("step-aside-after", base.stepAsideAfter()));
    n.finish();
    if (s.retryBackoffMax().compareTo(s.retryBackoff()) < 0) {
      throw n.has("retry-backoff-max")
          ? n.error("retry-backoff-max", "must not be shorter than retry-backoff")
          : n.error(
              "retry-backoff",
              "must not be longer than retry-backoff-max, "
                  + DurationText.format(s.retryBackoffMax())
                  + " unless set (set that higher too)");
    }
    return s;
  }
}
