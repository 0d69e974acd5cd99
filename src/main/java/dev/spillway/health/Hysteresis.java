package dev.spillway.health;

import java.time.Duration;
import java.time.Instant;

/**
 * Turns raw samples into a stable state: a worse sample takes effect at once; a better one only
 * after samples have been better for the whole hold period. Not thread-safe.
 */
final class Hysteresis {
  private final Duration hold;
  private Health current = Health.NORMAL;
  private Instant betterSince;

  Hysteresis(Duration hold) {
    this.hold = hold;
  }

  Health update(Health raw, Instant now) {
    if (raw.severity() >= current.severity()) {
      current = raw;
      betterSince = null;
    } else {
      if (betterSince == null) {
        betterSince = now;
      }
      if (!now.isBefore(betterSince.plus(hold))) {
        current = raw;
        betterSince = null;
      }
    }
    return current;
  }

  Health current() {
    return current;
  }

  /** One in the same state, the time better samples began included, that goes on on its own. */
  Hysteresis copy() {
    Hysteresis c = new Hysteresis(hold);
    c.current = current;
    c.betterSince = betterSince;
    return c;
  }
}
