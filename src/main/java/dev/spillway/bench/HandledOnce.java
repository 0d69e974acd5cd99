package dev.spillway.bench;

import java.time.Duration;
import java.util.function.LongSupplier;

/**
 * Whether a drainer handled every row a measured phase inserted exactly once: the table emptied, as
 * many rows handled as inserted and none dead-lettered. A row leaves the table only once a batch
 * holding it was handled, so with the table empty every row was handled at least once, and equal
 * counts then mean none twice: a row lost stays in the table, it does not hide behind one handled
 * twice.
 *
 * @param inserted rows the clients inserted, each counted once its insert returned
 * @param handled rows the drainer handled
 * @param deadLettered rows it sent to the dead letters instead
 * @param left rows left in the table once the drain ended
 */
record HandledOnce(long inserted, long handled, long deadLettered, long left) {
  /**
   * What {@code counted} reads once it reaches {@code inserted}, or after {@code within}: a
   * drainer's counters move just after its deletes commit, a moment after the table is found empty,
   * so a count read at once could report as lost rows that were handled.
   */
  static long countedBy(LongSupplier counted, long inserted, Duration within)
      throws InterruptedException {
    long deadline = System.nanoTime() + within.toNanos();
    long n = counted.getAsLong();
    while (n < inserted && System.nanoTime() < deadline) {
      Thread.sleep(10);
      n = counted.getAsLong();
    }
    return n;
  }

  boolean met() {
    return left == 0 && handled == inserted && deadLettered == 0;
  }

  /** The bar's line, without its indent: {@code drainer} names who handled the rows. */
  String line(String drainer) {
    return String.format(
        "every inserted row handled once by %s: %s (inserted %,d, handled %,d%s%s)",
        drainer,
        met() ? "met" : "NOT met",
        inserted,
        handled,
        deadLettered == 0 ? "" : String.format(", dead-lettered %,d", deadLettered),
        left == 0 ? "" : String.format(", left in the table %,d", left));
  }
}
