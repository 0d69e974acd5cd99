package dev.spillway.health;

import java.lang.reflect.RecordComponent;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

/** The default thresholds with those of one indicator changed, for tests of that indicator. */
final class Thresholds {
  private Thresholds() {}

  static HealthThresholds replicationLag(Duration throttle, Duration stop) {
    return defaultsWith(Map.of("replicationLagThrottle", throttle, "replicationLagStop", stop));
  }

  static HealthThresholds replicationLagBytes(long throttle, long stop, List<String> ignored) {
    return defaultsWith(
        Map.of(
            "replicationLagBytesThrottle",
            throttle,
            "replicationLagBytesStop",
            stop,
            "replicationLagIgnored",
            ignored));
  }

  static HealthThresholds connections(double throttle, double stop) {
    return defaultsWith(Map.of("connectionsThrottle", throttle, "connectionsStop", stop));
  }

  static HealthThresholds longTransaction(Duration longTransaction) {
    return defaultsWith(Map.of("longTransaction", longTransaction));
  }

  /** The defaults, with the named components given these values. */
  private static HealthThresholds defaultsWith(Map<String, Object> changed) {
    RecordComponent[] components = HealthThresholds.class.getRecordComponents();
    if (!Arrays.stream(components)
        .map(RecordComponent::getName)
        .toList()
        .containsAll(changed.keySet())) {
      throw new IllegalArgumentException("Not all of " + changed.keySet() + " are thresholds");
    }
    HealthThresholds defaults = HealthThresholds.defaults();
    try {
      Object[] values = new Object[components.length];
      for (int i = 0; i < components.length; i++) {
        values[i] =
            changed.containsKey(components[i].getName())
                ? changed.get(components[i].getName())
                : components[i].getAccessor().invoke(defaults);
      }
      return HealthThresholds.class
          .getDeclaredConstructor(
              Arrays.stream(components).map(RecordComponent::getType).toArray(Class[]::new))
          .newInstance(values);
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException(e);
    }
  }
}
