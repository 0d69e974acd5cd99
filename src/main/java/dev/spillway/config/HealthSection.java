package dev.spillway.config;

import dev.spillway.health.HealthMonitor;
import dev.spillway.health.HealthThresholds;
import java.time.Duration;

/** The {@code health:} section: sampling and the thresholds of each indicator. */
final class HealthSection {
  private HealthSection() {}

  static HealthMonitor.Settings from(ConfigNode n) {
    Duration interval = n.positiveDuration("interval", HealthMonitor.Settings.DEFAULT_INTERVAL);
    Duration hold = n.duration("hold", HealthMonitor.Settings.DEFAULT_HOLD);
    HealthThresholds t =
        new HealthThresholds(
            n.integer(
                "wal-archive-throttle",
                HealthThresholds.DEFAULT_WAL_ARCHIVE_THROTTLE,
                0,
                1_000_000),
            n.integer("wal-archive-stop", HealthThresholds.DEFAULT_WAL_ARCHIVE_STOP, 0, 1_000_000),
            n.bytes("wal-rate-throttle", HealthThresholds.DEFAULT_WAL_RATE_THROTTLE),
            n.bytes("wal-rate-stop", HealthThresholds.DEFAULT_WAL_RATE_STOP),
            n.duration(
                "replication-lag-throttle", HealthThresholds.DEFAULT_REPLICATION_LAG_THROTTLE),
            n.duration("replication-lag-stop", HealthThresholds.DEFAULT_REPLICATION_LAG_STOP),
            n.bytes(
                "replication-lag-bytes-throttle",
                HealthThresholds.DEFAULT_REPLICATION_LAG_BYTES_THROTTLE),
            n.bytes(
                "replication-lag-bytes-stop", HealthThresholds.DEFAULT_REPLICATION_LAG_BYTES_STOP),
            n.bytes("slot-wal-throttle", HealthThresholds.DEFAULT_SLOT_WAL_THROTTLE),
            n.bytes("slot-wal-stop", HealthThresholds.DEFAULT_SLOT_WAL_STOP),
            n.decimal("connections-throttle", HealthThresholds.DEFAULT_CONNECTIONS_THROTTLE, 0, 1),
            n.decimal("connections-stop", HealthThresholds.DEFAULT_CONNECTIONS_STOP, 0, 1),
            n.positiveDuration("long-transaction", HealthThresholds.DEFAULT_LONG_TRANSACTION),
            n.positiveDuration("latency-target", HealthThresholds.DEFAULT_LATENCY_TARGET),
            n.stringList("replication-lag-ignore"));
    n.finish(); // a misspelt stop named, not its throttle set above the default stop
    staged(
        n,
        "wal-archive",
        t.walArchiveThrottle(),
        t.walArchiveStop(),
        0,
        "a WAL segment waits to be archived");
    staged(n, "wal-rate", t.walRateThrottle(), t.walRateStop(), 0L, "any WAL is written");
    staged(
        n,
        "replication-lag",
        t.replicationLagThrottle(),
        t.replicationLagStop(),
        Duration.ZERO,
        "a standby lags at all");
    staged(
        n,
        "replication-lag-bytes",
        t.replicationLagBytesThrottle(),
        t.replicationLagBytesStop(),
        0L,
        "a standby lags at all");
    staged(
        n,
        "slot-wal",
        t.slotWalThrottle(),
        t.slotWalStop(),
        0L,
        "Spillway's replication slot holds any WAL");
    staged(
        n,
        "connections",
        t.connectionsThrottle(),
        t.connectionsStop(),
        0.0,
        "a connection is in use");
    return new HealthMonitor.Settings(interval, hold, t);
  }

  /**
   * Refuses an indicator's thresholds that leave out a stage: a stop at zero stops work whenever
   * the indicator reads anything at all, and a throttle at or above the stop lets work stop without
   * ever being throttled first. Names the throttle key when the file sets it, else the stop key.
   *
   * @param whenever when a stop at zero would stop work, such as {@code any WAL is written}
   */
  private static <T extends Comparable<T>> void staged(
      ConfigNode n, String indicator, T throttle, T stop, T zero, String whenever) {
    String throttleKey = indicator + "-throttle";
    String stopKey = indicator + "-stop";
    if (stop.compareTo(zero) <= 0) {
      throw n.error(stopKey, "must be above zero, or work would stop whenever " + whenever);
    }
    if (throttle.compareTo(stop) >= 0) {
      throw n.has(throttleKey)
          ? n.error(
              throttleKey,
              "must be below " + stopKey + ", or work would stop before it is ever throttled")
          : n.error(
              stopKey,
              "must be above "
                  + throttleKey
                  + " (set that lower too), or work would stop before it is ever throttled");
    }
  }
}
