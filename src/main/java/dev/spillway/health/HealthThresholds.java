package dev.spillway.health;

import java.time.Duration;
import java.util.List;

/**
 * When each indicator throttles or stops work. Defaults follow the practice of large PostgreSQL
 * installations: more than 42 WAL segments waiting to be archived stops work, autovacuum protecting
 * against wraparound stops work on its table.
 *
 * @param walArchiveThrottle WAL segments ready to archive that throttle
 * @param walArchiveStop WAL segments ready to archive that stop
 * @param walRateThrottle bytes of WAL per second that throttle
 * @param walRateStop bytes of WAL per second that stop
 * @param replicationLagThrottle standby replay lag that throttles
 * @param replicationLagStop standby replay lag that stops
 * @param replicationLagBytesThrottle standby replay lag in bytes that throttles
 * @param replicationLagBytesStop standby replay lag in bytes that stops
 * @param slotWalThrottle WAL held by Spillway's own slot that throttles
 * @param slotWalStop WAL held by Spillway's own slot that stops
 * @param connectionsThrottle share in use of the connections max_connections leaves unreserved that
 *     throttles
 * @param connectionsStop share in use of those that stops
 * @param longTransaction a transaction holding a lock on the target table longer than this stops
 *     work on that table
 * @param latencyTarget sub-batch p95 above this throttles; above four times this stops
 * @param replicationLagIgnored standbys, by their {@code application_name}, whose lag neither
 *     replication-lag indicator reads: one kept behind on purpose ({@code
 *     recovery_min_apply_delay}) would otherwise stop work for good
 */
public record HealthThresholds(
    int walArchiveThrottle,
    int walArchiveStop,
    long walRateThrottle,
    long walRateStop,
    Duration replicationLagThrottle,
    Duration replicationLagStop,
    long replicationLagBytesThrottle,
    long replicationLagBytesStop,
    long slotWalThrottle,
    long slotWalStop,
    double connectionsThrottle,
    double connectionsStop,
    Duration longTransaction,
    Duration latencyTarget,
    List<String> replicationLagIgnored) {
  public static final int DEFAULT_WAL_ARCHIVE_THROTTLE = 21;
  public static final int DEFAULT_WAL_ARCHIVE_STOP = 42;
  public static final long DEFAULT_WAL_RATE_THROTTLE = 100L << 20;
  public static final long DEFAULT_WAL_RATE_STOP = 200L << 20;
  public static final Duration DEFAULT_REPLICATION_LAG_THROTTLE = Duration.ofSeconds(10);
  public static final Duration DEFAULT_REPLICATION_LAG_STOP = Duration.ofSeconds(60);
  public static final long DEFAULT_REPLICATION_LAG_BYTES_THROTTLE = 256L << 20;
  public static final long DEFAULT_REPLICATION_LAG_BYTES_STOP = 1L << 30;
  public static final long DEFAULT_SLOT_WAL_THROTTLE = 1L << 30;
  public static final long DEFAULT_SLOT_WAL_STOP = 4L << 30;
  public static final double DEFAULT_CONNECTIONS_THROTTLE = 0.80;
  public static final double DEFAULT_CONNECTIONS_STOP = 0.95;
  public static final Duration DEFAULT_LONG_TRANSACTION = Duration.ofSeconds(60);
  public static final Duration DEFAULT_LATENCY_TARGET = Duration.ofSeconds(1);

  public HealthThresholds {
    replicationLagIgnored = List.copyOf(replicationLagIgnored);
  }

  public static HealthThresholds defaults() {
    return new HealthThresholds(
        DEFAULT_WAL_ARCHIVE_THROTTLE,
        DEFAULT_WAL_ARCHIVE_STOP,
        DEFAULT_WAL_RATE_THROTTLE,
        DEFAULT_WAL_RATE_STOP,
        DEFAULT_REPLICATION_LAG_THROTTLE,
        DEFAULT_REPLICATION_LAG_STOP,
        DEFAULT_REPLICATION_LAG_BYTES_THROTTLE,
        DEFAULT_REPLICATION_LAG_BYTES_STOP,
        DEFAULT_SLOT_WAL_THROTTLE,
        DEFAULT_SLOT_WAL_STOP,
        DEFAULT_CONNECTIONS_THROTTLE,
        DEFAULT_CONNECTIONS_STOP,
        DEFAULT_LONG_TRANSACTION,
        DEFAULT_LATENCY_TARGET,
        List.of());
  }
}
