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
            n.positiveDuration("latency-target", HealthThresholds.DEFAULT_LATENCY_TARGET));
    n.finish();
    return new HealthMonitor.Settings(interval, hold, t);
  }
}
