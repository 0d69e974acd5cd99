package dev.spillway.sink;

import java.time.Duration;

/**
 * How a pipeline's sink claims and runs batches.
 *
 * @param consumers worker consumers (threads) in this process; more processes share partitions
 * @param maxInFlight batches one consumer runs at once (one per partition at a time)
 * @param maxAttempts runs ending with a limit reached before the batch is delayed
 * @param consumeAfter how long a delayed batch waits
 * @param maxRetries retries of a retryable failure before the batch is dead-lettered
 * @param retryBackoff first pause before a retry; doubles up to {@code retryBackoffMax}
 * @param maxRowsPerRun rows one run may modify before it stops with the limit reached
 * @param maxRuntimePerRun time one run may take before it stops with the limit reached
 * @param subBatchPause pause between sub-batches when healthy
 * @param throttlePause pause before each sub-batch under THROTTLE (or UNKNOWN), a run's first
 *     included; {@code subBatchPause} when that is longer
 * @param throttleFactor sub-batch size multiplier under THROTTLE
 * @param subBatchFloor smallest sub-batch under THROTTLE
 * @param pollTimeout longest a worker waits for new batches in one poll
 * @param shutdownGrace how long closing waits for batches in hand to finish or be released
 * @param stepAsideAfter how long a table stays at STOP before a batch for it at the head of its
 *     partition steps aside to the delay topic, so the batches behind it can run; zero: never
 */
public record SinkSettings(
    int consumers,
    int maxInFlight,
    int maxAttempts,
    Duration consumeAfter,
    int maxRetries,
    Duration retryBackoff,
    Duration retryBackoffMax,
    long maxRowsPerRun,
    Duration maxRuntimePerRun,
    Duration subBatchPause,
    Duration throttlePause,
    double throttleFactor,
    int subBatchFloor,
    Duration pollTimeout,
    Duration shutdownGrace,
    Duration stepAsideAfter) {
  public static final int DEFAULT_CONSUMERS = 1;
  public static final int DEFAULT_MAX_IN_FLIGHT = 2;
  public static final int DEFAULT_MAX_ATTEMPTS = 3;
  public static final Duration DEFAULT_CONSUME_AFTER = Duration.ofMinutes(10);
  public static final int DEFAULT_MAX_RETRIES = 5;
  public static final Duration DEFAULT_RETRY_BACKOFF = Duration.ofSeconds(1);
  public static final Duration DEFAULT_RETRY_BACKOFF_MAX = Duration.ofMinutes(1);
  public static final long DEFAULT_MAX_ROWS_PER_RUN = 100_000;
  public static final Duration DEFAULT_MAX_RUNTIME_PER_RUN = Duration.ofSeconds(30);
  public static final Duration DEFAULT_SUB_BATCH_PAUSE = Duration.ZERO;
  public static final Duration DEFAULT_THROTTLE_PAUSE = Duration.ofMillis(500);
  public static final double DEFAULT_THROTTLE_FACTOR = 0.25;
  public static final int DEFAULT_SUB_BATCH_FLOOR = 10;
  public static final Duration DEFAULT_POLL_TIMEOUT = Duration.ofMillis(100);
  public static final Duration DEFAULT_SHUTDOWN_GRACE = Duration.ofSeconds(30);
  public static final Duration DEFAULT_STEP_ASIDE_AFTER = Duration.ofMinutes(1);

  public SinkSettings {
    if (consumers < 1 || maxInFlight < 1 || maxAttempts < 1 || maxRetries < 0) {
      throw new IllegalArgumentException("consumers, max-in-flight and max-attempts must be ≥ 1");
    }
    if (throttleFactor <= 0 || throttleFactor > 1) {
      throw new IllegalArgumentException("throttle-factor must be in (0, 1]");
    }
  }

  public static SinkSettings defaults() {
    return new SinkSettings(
        DEFAULT_CONSUMERS,
        DEFAULT_MAX_IN_FLIGHT,
        DEFAULT_MAX_ATTEMPTS,
        DEFAULT_CONSUME_AFTER,
        DEFAULT_MAX_RETRIES,
        DEFAULT_RETRY_BACKOFF,
        DEFAULT_RETRY_BACKOFF_MAX,
        DEFAULT_MAX_ROWS_PER_RUN,
        DEFAULT_MAX_RUNTIME_PER_RUN,
        DEFAULT_SUB_BATCH_PAUSE,
        DEFAULT_THROTTLE_PAUSE,
        DEFAULT_THROTTLE_FACTOR,
        DEFAULT_SUB_BATCH_FLOOR,
        DEFAULT_POLL_TIMEOUT,
        DEFAULT_SHUTDOWN_GRACE,
        DEFAULT_STEP_ASIDE_AFTER);
  }

  public SinkSettings withLimits(long maxRows, Duration maxRuntime) {
    return with(
        c -> {
          c.maxRowsPerRun = maxRows;
          c.maxRuntimePerRun = maxRuntime;
        });
  }

  public SinkSettings withShutdownGrace(Duration grace) {
    return with(c -> c.shutdownGrace = grace);
  }

  public SinkSettings withAttempts(int attempts, Duration delay) {
    return with(
        c -> {
          c.maxAttempts = attempts;
          c.consumeAfter = delay;
        });
  }

  public SinkSettings withRetries(int retries, Duration backoff) {
    return with(
        c -> {
          c.maxRetries = retries;
          c.retryBackoff = backoff;
          c.retryBackoffMax = backoff.multipliedBy(8);
        });
  }

  public SinkSettings withMaxInFlight(int maxInFlight) {
    return with(c -> c.maxInFlight = maxInFlight);
  }

  public SinkSettings withStepAsideAfter(Duration after) {
    return with(c -> c.stepAsideAfter = after);
  }

  public SinkSettings withSubBatchPause(Duration pause) {
    return with(c -> c.subBatchPause = pause);
  }

  public SinkSettings withThrottle(Duration pause, double factor, int floor) {
    return with(
        c -> {
          c.throttlePause = pause;
          c.throttleFactor = factor;
          c.subBatchFloor = floor;
        });
  }

  /** These settings with what {@code change} sets on a copy of them. */
  private SinkSettings with(java.util.function.Consumer<Copy> change) {
    Copy c = new Copy(this);
    change.accept(c);
    return c.build();
  }

  /** The settings' values, to change some of before making new settings of them. */
  private static final class Copy {
    int consumers;
    int maxInFlight;
    int maxAttempts;
    Duration consumeAfter;
    int maxRetries;
    Duration retryBackoff;
    Duration retryBackoffMax;
    long maxRowsPerRun;
    Duration maxRuntimePerRun;
    Duration subBatchPause;
    Duration throttlePause;
    double throttleFactor;
    int subBatchFloor;
    Duration pollTimeout;
    Duration shutdownGrace;
    Duration stepAsideAfter;

    Copy(SinkSettings s) {
      consumers = s.consumers;
      maxInFlight = s.maxInFlight;
      maxAttempts = s.maxAttempts;
      consumeAfter = s.consumeAfter;
      maxRetries = s.maxRetries;
      retryBackoff = s.retryBackoff;
      retryBackoffMax = s.retryBackoffMax;
      maxRowsPerRun = s.maxRowsPerRun;
      maxRuntimePerRun = s.maxRuntimePerRun;
      subBatchPause = s.subBatchPause;
      throttlePause = s.throttlePause;
      throttleFactor = s.throttleFactor;
      subBatchFloor = s.subBatchFloor;
      pollTimeout = s.pollTimeout;
      shutdownGrace = s.shutdownGrace;
      stepAsideAfter = s.stepAsideAfter;
    }

    SinkSettings build() {
      return new SinkSettings(
          consumers,
          maxInFlight,
          maxAttempts,
          consumeAfter,
          maxRetries,
          retryBackoff,
          retryBackoffMax,
          maxRowsPerRun,
          maxRuntimePerRun,
          subBatchPause,
          throttlePause,
          throttleFactor,
          subBatchFloor,
          pollTimeout,
          shutdownGrace,
          stepAsideAfter);
    }
  }
}
