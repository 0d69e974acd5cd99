package dev.spillway.bench;

import dev.spillway.event.TableName;
import dev.spillway.health.Health;
import dev.spillway.runtime.SpillwayRuntime;
import java.io.PrintWriter;
import java.time.Duration;

/**
 * Waits, after a benchmark's loading, for a table's health to be NORMAL again: loading writes WAL
 * fast enough to throttle the pipeline, which would then be measured throttled.
 */
final class Healthy {
  private Healthy() {}

  /**
   * Waits up to two minutes, saying when it waited, or that the table stayed unhealthy.
   *
   * @param which how to name the table in what is printed ("the child table")
   */
  static void await(SpillwayRuntime runtime, TableName table, String which, PrintWriter out)
      throws InterruptedException {
    long start = System.nanoTime();
    long deadline = start + Duration.ofMinutes(2).toNanos();
    Health h;
    while (!((h = runtime.health().state(SpillwayRuntime.MAIN, table)) instanceof Health.Normal)
        && System.nanoTime() < deadline) {
      Thread.sleep(100);
    }
    if (!(h instanceof Health.Normal)) {
      out.printf("   health after loading still %s: %s%n", h.label(), h.reason());
    } else if (System.nanoTime() - start > Duration.ofMillis(100).toNanos()) {
      out.printf(
          "   waited %.1f s after loading for %s's health to be NORMAL%n",
          (System.nanoTime() - start) / 1e9, which);
    }
    out.flush();
  }
}
