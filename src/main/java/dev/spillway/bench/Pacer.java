package dev.spillway.bench;

/**
 * One client's share of a fixed insert rate: its k-th insert is due at {@code start + offset + k *
 * interval}, the clients' offsets spreading them evenly over one interval. Not thread-safe.
 */
final class Pacer {
  private final long start;
  private final double intervalNanos;
  private long k;

  /**
   * @param rate inserts per second of all clients together
   * @param client this client's index, from 0 to {@code clients - 1}
   */
  Pacer(double rate, int clients, int client, long startNanos) {
    if (!(rate > 0) || clients < 1 || client < 0 || client >= clients) {
      throw new IllegalArgumentException(
          "A rate above 0 and a client between 0 and " + (clients - 1) + " are needed");
    }
    this.intervalNanos = clients * 1e9 / rate;
    this.start = startNanos + Math.round(client * intervalNanos / clients);
  }

  /** When the next insert is due, in {@link System#nanoTime()} terms. */
  long next() {
    return start + Math.round(k * intervalNanos);
  }

  /** The due insert has started. */
  void advance() {
    k++;
  }
}
