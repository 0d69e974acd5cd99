package dev.spillway.support;

import java.time.Duration;

/** Waits that double each time in a row, up to a cap. */
public final class Backoff {
  private Backoff() {}

  /**
   * The wait after the {@code n}-th try in a row (1 for the first): {@code first}, doubled {@code n
   * - 1} times, at most {@code max}.
   */
  public static Duration doubling(Duration first, int n, Duration max) {
    Duration wait = first;
    for (int i = 1; i < n && wait.compareTo(max) < 0; i++) {
      wait = wait.multipliedBy(2);
    }
    return wait.compareTo(max) > 0 ? max : wait;
  }
}
