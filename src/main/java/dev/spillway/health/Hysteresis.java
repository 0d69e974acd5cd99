package dev.spillway.health;

import java.time.Duration;
import java.time.Instant;

/**
 * Turns raw samples into a stable state: a worse sample takes effect at once; a better one only
 * after samples have been better for the whole hold period, and then the worst of them: samples
 * going from STOP to THROTTLE for the hold, then NORMAL, give THROTTLE, whose own hold NORMAL then
 * waits out. Not thread-safe.
 */
final class Hysteresis {
  private final Duration hold;
  private Health current = Health.NORMAL;
  private Instant betterSince;

  /** The worst sample since {@link #betterSince}, the latest of its severity; null with it. */
  private Health held;

  Hysteresis(Duration hold) {
    this.hold = hold;
  }

  Health update(Health raw, Instant now) {
    if (raw.severity() >= current.severity()) {
      current = raw;
      betterSince = null;
      held = null;
      return current;
    }
    if (betterSince == null) {
      betterSince = now;
      held = raw;
    } else if (raw.severity() >= held.severity()) {
      held = raw;
    }
    if (!now.isBefore(betterSince.plus(hold))) {
      current = held;
      betterSince = null;
      held = null;
      if (raw.severity() < current.severity()) {
        betterSince = now;
        held = raw;
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
    c.held = held;
    return c;
  }
}
