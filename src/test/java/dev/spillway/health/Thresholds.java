package dev.spillway.health;

import java.time.Duration;

/** The default thresholds with those of one indicator changed, for tests of that indicator. */
final class Thresholds {
  private static final HealthThresholds D = HealthThresholds.defaults();

  private Thresholds() {}

  static HealthThresholds replicationLag(Duration throttle, Duration stop) {
    return new HealthThresholds(
        D.walArchiveThrottle(),
        D.walArchiveStop(),
        D.walRateThrottle(),
        D.walRateStop(),
        throttle,
        stop,
        D.replicationLagBytesThrottle(),
        D.replicationLagBytesStop(),
        D.slotWalThrottle(),
        D.slotWalStop(),
        D.connectionsThrottle(),
        D.connectionsStop(),
        D.longTransaction(),
        D.latencyTarget());
  }

  static HealthThresholds connections(double throttle, double stop) {
    return new HealthThresholds(
        D.walArchiveThrottle(),
        D.walArchiveStop(),
        D.walRateThrottle(),
        D.walRateStop(),
        D.replicationLagThrottle(),
        D.replicationLagStop(),
        D.replicationLagBytesThrottle(),
        D.replicationLagBytesStop(),
        D.slotWalThrottle(),
        D.slotWalStop(),
        throttle,
        stop,
        D.longTransaction(),
        D.latencyTarget());
  }

  static HealthThresholds longTransaction(Duration longTransaction) {
    return new HealthThresholds(
        D.walArchiveThrottle(),
        D.walArchiveStop(),
        D.walRateThrottle(),
        D.walRateStop(),
        D.replicationLagThrottle(),
        D.replicationLagStop(),
        D.replicationLagBytesThrottle(),
        D.replicationLagBytesStop(),
        D.slotWalThrottle(),
        D.slotWalStop(),
        D.connectionsThrottle(),
        D.connectionsStop(),
        longTransaction,
        D.latencyTarget());
  }
}
