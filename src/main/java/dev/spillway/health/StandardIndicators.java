package dev.spillway.health;

import dev.spillway.config.DurationText;
import dev.spillway.event.TableName;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Clock;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;

/** The indicators Spillway samples from PostgreSQL's own views. */
public final class StandardIndicators {
  private StandardIndicators() {}

  /**
   * A fresh set for one database.
   *
   * @param slot Spillway's replication slot in that database, or null when it has none
   * @param latencyP95 the pipelines' recent sub-batch p95 in seconds on this database, NaN if none
   */
  public static List<HealthIndicator> forDatabase(
      HealthThresholds t, String slot, Clock clock, Supplier<Double> latencyP95) {
    return List.of(
        new ReadOnly(),
        new Autovacuum(),
        new WalArchive(t),
        new WalRate(t, clock),
        new ReplicationLag(t),
        new SlotWal(t, slot),
        new Connections(t),
        new Locks(t),
        new Latency(t, latencyP95));
  }

  /**
   * What an indicator reads while the role may not see other roles' sessions: it cannot tell, so
   * work goes on throttled, and the reason says what to grant.
   */
  static Health blind(String what) {
    return new Health.Unknown(
        "Spillway's role may not see "
            + what
            + " (it needs pg_read_all_stats: GRANT pg_monitor TO it)");
  }

  /**
   * A database that takes no writes stops work: every statement would fail, and batches are better
   * left in Kafka until it takes them again (a failover ending, maintenance over) than retried into
   * the dead letters.
   */
  static final class ReadOnly implements HealthIndicator {
    @Override
    public String name() {
      return "read-only";
    }

    @Override
    public Health sample(Connection c, TableName table) throws SQLException {
      try (Statement s = c.createStatement();
          ResultSet rs = s.executeQuery(HealthStatements.READ_ONLY)) {
        rs.next();
        if (rs.getBoolean(1)) {
          return new Health.Stop("the database is a standby in recovery; it takes no writes");
        }
        if (rs.getBoolean(2)) {
          return new Health.Stop(
              "default_transaction_read_only is on; the database takes no writes");
        }
        return Health.NORMAL;
      }
    }
  }

  /** The name of the indicator of autovacuum on a table worked on. */
  public static final String AUTOVACUUM = "autovacuum";

  /** Autovacuum on the table: throttles; one preventing wraparound stops. */
  static final class Autovacuum extends TableQuery {
    Autovacuum() {
      super(HealthStatements.AUTOVACUUM);
    }

    @Override
    public String name() {
      return AUTOVACUUM;
    }

    @Override
    Health read(TableName table, ResultSet rs) throws SQLException {
      if (!rs.getBoolean(4)) {
        return blind("autovacuum workers");
      }
      if (rs.getLong(2) == 0) {
        return Health.NORMAL;
      }
      return rs.getBoolean(3)
          ? new Health.Stop("autovacuum to prevent wraparound runs on " + table)
          : new Health.Throttle("autovacuum runs on " + table);
    }
  }

  /** WAL segments waiting to be archived. */
  static final class WalArchive implements HealthIndicator {
    private final HealthThresholds t;

    WalArchive(HealthThresholds t) {
      this.t = t;
    }

    @Override
    public String name() {
      return "wal-archive";
    }

    @Override
    public Health sample(Connection c, TableName table) throws SQLException {
      long ready = single(c, HealthStatements.WAL_ARCHIVE_READY);
      return grade(
          ready,
          t.walArchiveThrottle(),
          t.walArchiveStop(),
          ready
              + " WAL segments wait to be archived (throttle above "
              + t.walArchiveThrottle()
              + ", stop above "
              + t.walArchiveStop()
              + ")");
    }
  }

  /** Bytes of WAL written per second since the previous sample. */
  static final class WalRate implements HealthIndicator {
    private final HealthThresholds t;
    private final Clock clock;
    private long lastPosition = -1;
    private long lastMillis;

    WalRate(HealthThresholds t, Clock clock) {
      this.t = t;
      this.clock = clock;
    }

    @Override
    public String name() {
      return "wal-rate";
    }

    @Override
    public Health sample(Connection c, TableName table) throws SQLException {
      long position = single(c, HealthStatements.WAL_POSITION);
      long now = clock.millis();
      long previous = lastPosition;
      long previousMillis = lastMillis;
      lastPosition = position;
      lastMillis = now;
      if (previous < 0 || now <= previousMillis) {
        return Health.NORMAL;
      }
      double perSecond = (position - previous) * 1000.0 / (now - previousMillis);
      return grade(
          perSecond,
          t.walRateThrottle(),
          t.walRateStop(),
          String.format("WAL written at %.1f MB/s", perSecond / (1 << 20)));
    }
  }

  /** Replay lag of the slowest standby not left out by name. */
  static final class ReplicationLag implements HealthIndicator {
    private final HealthThresholds t;

    ReplicationLag(HealthThresholds t) {
      this.t = t;
    }

    @Override
    public String name() {
      return "replication-lag";
    }

    @Override
    public Health sample(Connection c, TableName table) throws SQLException {
      try (PreparedStatement s = c.prepareStatement(HealthStatements.REPLICATION_LAG)) {
        s.setArray(1, c.createArrayOf("text", t.replicationLagIgnored().toArray()));
        try (ResultSet rs = s.executeQuery()) {
          rs.next();
          if (!rs.getBoolean(3)) {
            return blind("standbys' replay lag");
          }
          return graded(rs.getDouble(1), rs.getLong(2));
        }
      }
    }

    /** The slowest standby's replay lag, in seconds and in bytes, against the thresholds. */
    Health graded(double seconds, long bytes) {
      String why = String.format("standby replay lag %.1f s, %d MB", seconds, bytes >> 20);
      return Health.worst(
          grade(
              seconds,
              t.replicationLagThrottle().toMillis() / 1000.0,
              t.replicationLagStop().toMillis() / 1000.0,
              why),
          grade(bytes, t.replicationLagBytesThrottle(), t.replicationLagBytesStop(), why));
    }
  }

  /** WAL held back by Spillway's own replication slot: capture is falling behind. */
  static final class SlotWal implements HealthIndicator {
    private final HealthThresholds t;
    private final String slot;

    SlotWal(HealthThresholds t, String slot) {
      this.t = t;
      this.slot = slot;
    }

    @Override
    public String name() {
      return "slot-wal";
    }

    @Override
    public Health sample(Connection c, TableName table) throws SQLException {
      if (slot == null) {
        return Health.NORMAL;
      }
      long held;
      try (PreparedStatement ps = c.prepareStatement(HealthStatements.SLOT_WAL)) {
        ps.setString(1, slot);
        try (ResultSet rs = ps.executeQuery()) {
          held = rs.next() ? rs.getLong(1) : 0;
        }
      }
      return grade(
          held,
          t.slotWalThrottle(),
          t.slotWalStop(),
          "slot " + slot + " holds " + (held >> 20) + " MB of WAL");
    }
  }

  /**
   * Client connections in use against those max_connections leaves to an application's roles: the
   * reserved ones taken off, as a role without them is refused once the rest are taken.
   */
  static final class Connections implements HealthIndicator {
    private final HealthThresholds t;

    Connections(HealthThresholds t) {
      this.t = t;
    }

    @Override
    public String name() {
      return "connections";
    }

    @Override
    public Health sample(Connection c, TableName table) throws SQLException {
      try (Statement s = c.createStatement();
          ResultSet rs = s.executeQuery(HealthStatements.CONNECTIONS)) {
        rs.next();
        return graded(rs.getLong(1), rs.getInt(2), rs.getInt(3));
      }
    }

    Health graded(long clients, int max, int reserved) {
      int open = Math.max(1, max - reserved);
      double share = (double) clients / open;
      return grade(
          share,
          t.connectionsThrottle(),
          t.connectionsStop(),
          String.format(
              "%.0f%% in use of the %d connections max_connections leaves unreserved",
              share * 100, open));
    }
  }

  /** Others waiting for locks on the table, and long transactions holding them. */
  static final class Locks extends TableQuery {
    private final HealthThresholds t;

    Locks(HealthThresholds t) {
      super(HealthStatements.LOCKS);
      this.t = t;
    }

    @Override
    public String name() {
      return "locks";
    }

    @Override
    void setMore(PreparedStatement ps) throws SQLException {
      ps.setDouble(2, t.longTransaction().toMillis() / 1000.0);
    }

    @Override
    Health read(TableName table, ResultSet rs) throws SQLException {
      long waiting = rs.getLong(2);
      long longHolders = rs.getLong(3);
      Health waits =
          waiting > 0
              ? new Health.Throttle(waiting + " session(s) wait for locks on " + table)
              : Health.NORMAL;
      if (!rs.getBoolean(4)) {
        // Lock waits show in pg_locks to every role; how old a transaction is does not.
        return Health.worst(waits, blind("how long other roles' transactions have held locks"));
      }
      if (longHolders > 0) {
        return new Health.Stop(
            longHolders
                + " transaction(s) older than "
                + DurationText.format(t.longTransaction())
                + " hold locks on "
                + table);
      }
      return waits;
    }
  }

  /** The pipelines' own sub-batch latency (p95 over a recent window) against the target. */
  static final class Latency implements HealthIndicator {
    private final HealthThresholds t;
    private final Supplier<Double> p95Seconds;

    Latency(HealthThresholds t, Supplier<Double> p95Seconds) {
      this.t = t;
      this.p95Seconds = p95Seconds;
    }

    @Override
    public String name() {
      return "sub-batch-latency";
    }

    @Override
    public Health sample(Connection c, TableName table) {
      double p95 = p95Seconds.get();
      if (Double.isNaN(p95)) {
        return Health.NORMAL;
      }
      double target = t.latencyTarget().toMillis() / 1000.0;
      return grade(
          p95,
          target,
          4 * target,
          String.format(
              "sub-batch p95 %.0f ms against a %.0f ms target", p95 * 1000, target * 1000));
    }
  }

  /**
   * A per-table indicator read by one statement for all the tables worked on: their quoted names
   * its first parameter, a row per table, the quoted name first.
   */
  abstract static class TableQuery implements HealthIndicator {
    private final String sql;

    TableQuery(String sql) {
      this.sql = sql;
    }

    @Override
    public final boolean perTable() {
      return true;
    }

    @Override
    public final Health sample(Connection c, TableName table) throws SQLException {
      return sampleTables(c, List.of(table)).get(table);
    }

    /** Sets the statement's parameters after the first; none by default. */
    void setMore(PreparedStatement ps) throws SQLException {}

    /** One table's state, from its row. */
    abstract Health read(TableName table, ResultSet rs) throws SQLException;

    @Override
    public final Map<TableName, Health> sampleTables(Connection c, List<TableName> tables)
        throws SQLException {
      Map<String, TableName> byQuoted = new HashMap<>();
      tables.forEach(table -> byQuoted.put(table.quoted(), table));
      Map<TableName, Health> out = new LinkedHashMap<>();
      try (PreparedStatement ps = c.prepareStatement(sql)) {
        ps.setArray(1, c.createArrayOf("text", byQuoted.keySet().toArray()));
        setMore(ps);
        try (ResultSet rs = ps.executeQuery()) {
          while (rs.next()) {
            TableName table = byQuoted.get(rs.getString(1));
            if (table != null) {
              out.put(table, read(table, rs));
            }
          }
        }
      }
      return out;
    }
  }

  /** STOP above {@code stop}, THROTTLE above {@code throttle}, otherwise NORMAL. */
  static Health grade(double value, double throttle, double stop, String why) {
    if (value > stop) {
      return new Health.Stop(why);
    }
    if (value > throttle) {
      return new Health.Throttle(why);
    }
    return Health.NORMAL;
  }

  private static long single(Connection c, String sql) throws SQLException {
    try (Statement s = c.createStatement();
        ResultSet rs = s.executeQuery(sql)) {
      rs.next();
      return rs.getLong(1);
    }
  }
}
