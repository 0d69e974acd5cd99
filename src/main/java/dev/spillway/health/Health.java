package dev.spillway.health;

import java.util.Objects;

/**
 * What the database can take right now. {@link Unknown} (an indicator that could not be read) is
 * acted on like {@link Throttle}: never a reason to stop, never a reason to go full speed.
 */
public sealed interface Health {
  /** Ordering for combining: the worst signal wins. */
  int severity();

  /** Why, for status and logs; empty for {@link Normal}. */
  String reason();

  default boolean isStop() {
    return this instanceof Stop;
  }

  /** True for Throttle and Unknown: work goes on with smaller sub-batches and pauses. */
  default boolean slowsDown() {
    return this instanceof Throttle || this instanceof Unknown;
  }

  Normal NORMAL = new Normal();

  static Health worst(Health a, Health b) {
    return b.severity() > a.severity() ? b : a;
  }

  /** The same state with its reason prefixed by the indicator that gave it. */
  default Health from(String indicator) {
    if (this instanceof Throttle t) {
      return new Throttle(indicator + ": " + t.reason());
    }
    if (this instanceof Unknown u) {
      return new Unknown(indicator + ": " + u.reason());
    }
    if (this instanceof Stop s) {
      return new Stop(indicator + ": " + s.reason());
    }
    return this;
  }

  /** The name used in metrics and status: NORMAL, THROTTLE, UNKNOWN or STOP. */
  default String label() {
    return getClass().getSimpleName().toUpperCase(java.util.Locale.ROOT);
  }

  record Normal() implements Health {
    @Override
    public int severity() {
      return 0;
    }

    @Override
    public String reason() {
      return "";
    }
  }

  record Throttle(String reason) implements Health {
    public Throttle {
      Objects.requireNonNull(reason);
    }

    @Override
    public int severity() {
      return 1;
    }
  }

  record Unknown(String reason) implements Health {
    public Unknown {
      Objects.requireNonNull(reason);
    }

    @Override
    public int severity() {
      return 2;
    }
  }

  record Stop(String reason) implements Health {
    public Stop {
      Objects.requireNonNull(reason);
    }

    @Override
    public int severity() {
      return 3;
    }
  }
}
