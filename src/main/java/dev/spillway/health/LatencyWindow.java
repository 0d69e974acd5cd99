package dev.spillway.health;

import java.time.Clock;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Arrays;
import java.util.Deque;

/**
 * Recent sub-batch latencies of one database, for the latency indicator: samples older than the
 * window are dropped. Thread-safe.
 */
public final class LatencyWindow {
  public static final Duration DEFAULT_WINDOW = Duration.ofMinutes(1);
  private static final int MAX_SAMPLES = 10_000;

  private final Clock clock;
  private final Duration window;
  private final Deque<long[]> samples = new ArrayDeque<>();

  public LatencyWindow(Clock clock, Duration window) {
    this.clock = clock;
    this.window = window;
  }

  public synchronized void record(Duration latency) {
    samples.addLast(new long[] {clock.millis(), latency.toNanos()});
    if (samples.size() > MAX_SAMPLES) {
      samples.removeFirst();
    }
  }

  /** p95 in seconds over the window, or NaN without samples. */
  public synchronized double p95Seconds() {
    long oldest = clock.millis() - window.toMillis();
    while (!samples.isEmpty() && samples.peekFirst()[0] < oldest) {
      samples.removeFirst();
    }
    if (samples.isEmpty()) {
      return Double.NaN;
    }
    long[] nanos = samples.stream().mapToLong(s -> s[1]).toArray();
    Arrays.sort(nanos);
    int rank = (int) Math.ceil(0.95 * nanos.length) - 1;
    return nanos[Math.max(0, rank)] / 1e9;
  }
}
