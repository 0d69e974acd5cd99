package dev.spillway.health;

import dev.spillway.event.TableName;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Samples the indicators of each database at an interval and publishes NORMAL / THROTTLE / STOP per
 * database and per table being worked on, with hysteresis. It keeps a connection of its own to each
 * database; one it cannot connect to is at STOP. Each database is sampled on a thread of its own
 * ({@link #start()}), so one slow to answer holds back no other's state, or all of them by {@link
 * #runOnce()} for tests; {@link #state} never blocks.
 */
public final class HealthMonitor implements HealthGate, AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(HealthMonitor.class);

  /** The reading of whether the monitor could connect: STOP when it could not. */
  static final String CONNECTION = "connection";

  /**
   * A database's state until its first sample is in, which can take seconds (a connection to open,
   * a slow answer): work goes on, slowed, as under any state the monitor cannot tell.
   */
  static final Health NOT_SAMPLED = new Health.Unknown("not sampled yet");

  /**
   * How old a database's last sample may be, at least, before its state reads UNKNOWN: its sampling
   * stuck or ended (an {@link Error} in an indicator), the monitor can no longer tell, and a STOP
   * or NORMAL read long ago is not the database's state now. Three intervals, when longer.
   */
  static final Duration STALE_AFTER = Duration.ofSeconds(30);

  /** How long the check that a kept connection still answers may take. */
  private static final int VALID_SECONDS = 5;

  /**
   * What the monitor's session allows each of its statements: the server itself ends one that waits
   * for a lock or runs long, within the driver's read time-out. A statement the driver gave up on
   * would otherwise go on waiting on the server, a connection held for nothing, and every sample
   * could leave another.
   */
  static final String SESSION_LIMITS =
      "SELECT set_config('statement_timeout', '5s', false), set_config('lock_timeout', '1s', false)";

  /**
   * @param interval time between samples
   * @param hold how long samples must be better before the state improves
   */
  public record Settings(Duration interval, Duration hold, HealthThresholds thresholds) {
    public static final Duration DEFAULT_INTERVAL = Duration.ofSeconds(1);
    public static final Duration DEFAULT_HOLD = Duration.ofSeconds(30);

    public static Settings defaults() {
      return new Settings(DEFAULT_INTERVAL, DEFAULT_HOLD, HealthThresholds.defaults());
    }
  }

  /** One indicator's last reading, for status and metrics. */
  public record Reading(String database, TableName table, String indicator, Health health) {}

  private record Key(String database, TableName table) {}

  private final Settings settings;

  /** {@link #STALE_AFTER}, or three intervals when longer. */
  private final Duration staleAfter;

  private final Clock clock;
  private final Map<String, DataSource> databases;
  private final Map<String, List<HealthIndicator>> indicators = new ConcurrentHashMap<>();
  private final Set<Key> watched = ConcurrentHashMap.newKeySet();

  /** Per table, the indicators whose THROTTLE its combined state leaves out. */
  private final Map<Key, Set<String>> throttleExempt = new ConcurrentHashMap<>();

  private final Map<Key, Hysteresis> hysteresis = new ConcurrentHashMap<>();
  private final Map<String, AtomicInteger> gauges = new ConcurrentHashMap<>();
  private final Map<String, Connection> connections = new ConcurrentHashMap<>();
  private final MeterRegistry registry;
  private final Map<String, Timer> sampleTimers = new ConcurrentHashMap<>();
  private final Map<Key, Health> published = new ConcurrentHashMap<>();
  private final Map<String, List<Reading>> readings = new ConcurrentHashMap<>();
  private final Map<String, java.time.Instant> sampledAt = new ConcurrentHashMap<>();

  /**
   * The last STOP each indicator read (per database, and table for a per-table one), until it reads
   * something else: an indicator failing after a STOP (its query timing out under the load that
   * made it stop) keeps it rather than lift it.
   */
  private final Map<String, KeptStop> lastStops = new ConcurrentHashMap<>();

  /** A STOP kept, and whether its indicator failing since has been logged (once). */
  private record KeptStop(Health stop, boolean said) {}

  private final Set<String> failing = ConcurrentHashMap.newKeySet();
  private volatile ScheduledExecutorService executor;
  private volatile boolean closed;

  /**
   * @param databases database name → where the monitor opens the one connection it keeps to it
   */
  public HealthMonitor(
      Settings settings, Map<String, DataSource> databases, Clock clock, MeterRegistry registry) {
    this.settings = settings;
    Duration threeIntervals = settings.interval().multipliedBy(3);
    this.staleAfter = threeIntervals.compareTo(STALE_AFTER) > 0 ? threeIntervals : STALE_AFTER;
    this.databases = new LinkedHashMap<>(databases);
    this.clock = clock;
    this.registry = registry;
    for (String db : databases.keySet()) {
      indicators.put(db, new java.util.concurrent.CopyOnWriteArrayList<>());
      sampleTimers.put(
          db,
          Timer.builder("spillway_health_sample")
              .description("Time spent sampling the health indicators of a database")
              .tag("database", db)
              .register(registry));
    }
  }

  /** Adds indicators for one database (the standard set, or a custom one). */
  public void addIndicators(String database, List<HealthIndicator> more) {
    indicators
        .computeIfAbsent(database, d -> new java.util.concurrent.CopyOnWriteArrayList<>())
        .addAll(more);
  }

  /** Samples every database now, one after another, and publishes the new states. */
  public void runOnce() {
    databases.keySet().forEach(this::sampleDatabase);
  }

  /**
   * Samples one database and publishes its new states; the other databases' stay as they are, so
   * one that is slow to answer delays no other's.
   */
  private void sampleDatabase(String db) {
    if (closed) {
      return; // closed: no connection is opened again, no state published
    }
    long start = System.nanoTime();
    List<HealthIndicator> all = indicators.getOrDefault(db, List.of());
    List<TableName> tables = new ArrayList<>();
    watched.stream().filter(k -> k.database().equals(db)).forEach(k -> tables.add(k.table()));
    List<Reading> out = new ArrayList<>();
    Health unread = null; // what the indicators not read this time show, when they could not be
    Health dbRaw = Health.NORMAL;
    Map<TableName, Health> tableRaw = new LinkedHashMap<>();
    try {
      Connection c = connection(db, databases.get(db));
      out.add(new Reading(db, null, CONNECTION, Health.NORMAL));
      for (HealthIndicator i : all) {
        if (i.perTable()) {
          Map<TableName, Health> read = sample(i, c, tables);
          for (TableName t : tables) {
            Health h = stopStays(db, t, i.name(), read.get(t));
            out.add(new Reading(db, t, i.name(), h));
            tableRaw.merge(t, exempt(db, t, i.name(), h), Health::worst);
          }
        } else {
          Health h = stopStays(db, null, i.name(), sample(i, c));
          out.add(new Reading(db, null, i.name(), h));
          dbRaw = Health.worst(dbRaw, h);
        }
      }
    } catch (SQLException | RuntimeException e) {
      // No work can reach a database the monitor cannot: it waits rather than spend its retries.
      String why = e.getMessage() == null ? e.toString() : e.getMessage();
      dbRaw = new Health.Stop("database " + db + " unreachable: " + why);
      out.add(new Reading(db, null, CONNECTION, dbRaw));
      unread = new Health.Unknown("database " + db + " unreachable");
    }
    if (closed) {
      return; // closed while sampling: what it read is not published, nor said
    }
    java.time.Instant now = clock.instant();
    Health stale = staleness(db, now);
    if (stale != null) {
      // Read as UNKNOWN since, the database and its tables get better only after a hold, as from
      // any state worse than what is read now.
      hysteresis.forEach(
          (k, h) -> {
            if (k.database().equals(db)) {
              h.update(Health.worst(h.current(), stale), now);
            }
          });
    }
    Map<Key, Health> next = new LinkedHashMap<>();
    Key dbKey = new Key(db, null);
    next.put(dbKey, stable(dbKey, dbRaw, now, () -> new Hysteresis(settings.hold())));
    // A table sampled for the first time starts where its database stands, in the middle of a hold
    // too: it gets better no sooner than the database and the tables watched before it.
    Hysteresis dbState = hysteresis.get(dbKey);
    for (TableName t : tables) {
      Health raw = Health.worst(dbRaw, tableRaw.getOrDefault(t, Health.NORMAL));
      next.put(new Key(db, t), stable(new Key(db, t), raw, now, dbState::copy));
    }
    published.putAll(next);
    sampledAt.put(db, now);
    readings.put(db, List.copyOf(out));
    if (unread != null) {
      // Their gauges would go on showing what they read before the database went away (a STOP
      // alert firing all the while): unknown until they are read again.
      Set<String> read = new HashSet<>();
      out.forEach(r -> read.add(r.indicator() + "|" + r.table()));
      for (HealthIndicator i : all) {
        for (TableName t : i.perTable() ? tables : Collections.<TableName>singletonList(null)) {
          if (!read.contains(i.name() + "|" + t)) {
            gauge(db, t, i.name(), unread);
          }
        }
      }
    }
    out.forEach(r -> gauge(r.database(), r.table(), r.indicator(), r.health()));
    next.forEach((k, h) -> gauge(k.database(), k.table(), "combined", h));
    sampleTimers.get(db).record(System.nanoTime() - start, TimeUnit.NANOSECONDS);
  }

  /**
   * The monitor's connection to the database: the one it keeps while it still answers, else a new
   * one. A database that cannot be connected to throws.
   */
  private Connection connection(String db, DataSource ds) throws SQLException {
    Connection kept = connections.get(db);
    if (kept != null) {
      if (kept.isValid(VALID_SECONDS) && autoCommitted(kept)) {
        return kept;
      }
      connections.remove(db);
      closeQuietly(kept);
    }
    Connection c = ds.getConnection();
    try {
      c.setAutoCommit(true);
      try (Statement st = c.createStatement()) {
        st.execute(SESSION_LIMITS);
      }
    } catch (SQLException e) {
      closeQuietly(c);
      throw e;
    }
    connections.put(db, c);
    if (closed) {
      connections.remove(db);
      closeQuietly(c);
      throw new SQLException("health monitor closed");
    }
    return c;
  }

  /**
   * Whether the connection samples outside any transaction, as it was opened to; one an indicator
   * left in a transaction would read a frozen snapshot and hold back vacuum, so it is replaced.
   */
  private static boolean autoCommitted(Connection c) {
    try {
      return c.getAutoCommit();
    } catch (SQLException e) {
      return false;
    }
  }

  private static void closeQuietly(Connection c) {
    try {
      c.close();
    } catch (SQLException e) {
      // it was broken already
    }
  }

  /** A database-wide indicator's state, UNKNOWN when it could not be read. */
  private static Health sample(HealthIndicator i, Connection c) {
    try {
      return i.sample(c, null).from(i.name());
    } catch (Exception e) {
      return unreadable(i, e);
    }
  }

  /**
   * The reading, or, when it could not be made (UNKNOWN) after a STOP, that STOP: it stays until
   * the indicator reads something again.
   */
  private Health stopStays(String db, TableName table, String indicator, Health read) {
    String key = db + "|" + table + "|" + indicator;
    if (read instanceof Health.Unknown) {
      KeptStop kept = lastStops.get(key);
      if (kept == null) {
        return read;
      }
      if (!kept.said()) {
        lastStops.put(key, new KeptStop(kept.stop(), true));
        log.info(
            "Health of {}{}: {}; its STOP stays until it is read again",
            db,
            table == null ? "" : " table " + table,
            read.reason());
      }
      return new Health.Stop(kept.stop().reason() + " (last read; " + read.reason() + ")");
    }
    if (read.isStop()) {
      lastStops.put(key, new KeptStop(read, false));
    } else {
      lastStops.remove(key);
    }
    return read;
  }

  /**
   * An indicator that cannot be read never stops work nor lets it run at full speed, unless its
   * last reading was a STOP ({@link #stopStays}).
   */
  private static Health unreadable(HealthIndicator i, Exception e) {
    log.debug("Health indicator {} failed: {}", i.name(), e.getMessage());
    return new Health.Unknown(i.name() + " could not be read: " + e.getMessage());
  }

  /**
   * Has the combined state of a table leave out a THROTTLE from {@code indicator}; its reading
   * still shows it, and a STOP from it still stops. For a buffer table's routine autovacuum: the
   * buffer's deletes keep the table small, and slowing them while it is vacuumed only leaves the
   * next vacuum more to do and the buffer's rows longer unhandled.
   */
  public void exemptFromThrottle(String database, TableName table, String indicator) {
    throttleExempt
        .computeIfAbsent(new Key(database, table), k -> ConcurrentHashMap.newKeySet())
        .add(indicator);
  }

  /** What a per-table reading adds to the table's combined state. */
  private Health exempt(String db, TableName t, String indicator, Health h) {
    boolean exempt =
        h instanceof Health.Throttle
            && throttleExempt.getOrDefault(new Key(db, t), Set.of()).contains(indicator);
    return exempt ? Health.NORMAL : h;
  }

  /**
   * A per-table indicator read for all {@code tables} at once: each table's state, UNKNOWN where it
   * could not be read.
   */
  private static Map<TableName, Health> sample(
      HealthIndicator i, Connection c, List<TableName> tables) {
    Map<TableName, Health> out = new LinkedHashMap<>();
    if (tables.isEmpty()) {
      return out;
    }
    Map<TableName, Health> read;
    try {
      read = i.sampleTables(c, tables);
    } catch (Exception e) {
      Health unknown = unreadable(i, e);
      tables.forEach(t -> out.put(t, unknown));
      return out;
    }
    for (TableName t : tables) {
      Health h = read.get(t);
      out.put(
          t,
          h == null ? new Health.Unknown(i.name() + " gave no reading of " + t) : h.from(i.name()));
    }
    return out;
  }

  private Health stable(
      Key key, Health raw, java.time.Instant now, Supplier<Hysteresis> startingState) {
    Hysteresis h = hysteresis.computeIfAbsent(key, k -> startingState.get());
    Health before = h.current();
    Health after = h.update(raw, now);
    if (!before.label().equals(after.label())) {
      log.info(
          "Health of {}{} is now {}{}",
          key.database(),
          key.table() == null ? "" : " table " + key.table(),
          after.label(),
          after.reason().isEmpty() ? "" : ": " + after.reason());
    }
    return after;
  }

  private void gauge(String db, TableName table, String indicator, Health h) {
    String id = db + "|" + table + "|" + indicator;
    gauges
        .computeIfAbsent(
            id,
            k -> {
              AtomicInteger v = new AtomicInteger();
              Gauge.builder("spillway_health_state", v, read -> shown(db, read.get()))
                  .description("0 normal, 1 throttle, 2 unknown (acts as throttle), 3 stop")
                  .tag("database", db)
                  .tag("table", table == null ? "" : table.toString())
                  .tag("indicator", indicator)
                  .register(registry);
              return v;
            })
        .set(h.severity());
  }

  /**
   * What a gauge shows of the severity it last read: UNKNOWN once no sample of its database has
   * come in for long, as {@link #state} reads (a STOP stays a STOP).
   */
  private int shown(String db, int severity) {
    return Math.max(severity, current(db, Health.NORMAL).severity());
  }

  @Override
  public Health state(String database, TableName table) {
    Key key = new Key(database, table);
    Health h = published.get(key);
    if (h == null) {
      if (!databases.containsKey(database)) {
        return Health.NORMAL;
      }
      if (table != null) {
        watched.add(key);
      }
      h = published.getOrDefault(new Key(database, null), NOT_SAMPLED);
    }
    return current(database, h);
  }

  /**
   * The state published for the database, or UNKNOWN when no sample has come in for longer than
   * {@link #STALE_AFTER} (a STOP stays a STOP).
   */
  private Health current(String db, Health published) {
    Health stale = staleness(db, clock.instant());
    return stale == null ? published : Health.worst(published, stale);
  }

  /** UNKNOWN when the database's last sample is older than {@link #staleAfter} at {@code now}. */
  private Health staleness(String db, java.time.Instant now) {
    java.time.Instant at = sampledAt.get(db);
    if (at == null) {
      return null;
    }
    Duration age = Duration.between(at, now);
    return age.compareTo(staleAfter) <= 0
        ? null
        : new Health.Unknown("no health sample of " + db + " for " + age.toSeconds() + " s");
  }

  /** The last reading of every indicator, by database in the order they were given. */
  public List<Reading> readings() {
    List<Reading> out = new ArrayList<>();
    databases.keySet().forEach(db -> out.addAll(readings.getOrDefault(db, List.of())));
    return out;
  }

  /** The combined state of a database ({@code table} null) or of a watched table in it. */
  public record State(String database, TableName table, Health health) {
    /** By database; in each, the database as a whole first, then its tables by name. */
    static final Comparator<State> ORDER =
        Comparator.comparing(State::database)
            .thenComparing(
                State::table, Comparator.nullsFirst(Comparator.comparing(TableName::toString)));
  }

  /**
   * The combined state of each database and watched table, by database, the database as a whole
   * before its tables.
   */
  public List<State> states() {
    List<State> out = new ArrayList<>();
    published.forEach(
        (k, v) -> out.add(new State(k.database(), k.table(), current(k.database(), v))));
    out.sort(State.ORDER);
    return out;
  }

  public Settings settings() {
    return settings;
  }

  /**
   * Samples each database at the configured interval, each on a daemon thread of its own, until
   * closed.
   */
  public void start() {
    AtomicInteger threads = new AtomicInteger();
    executor =
        Executors.newScheduledThreadPool(
            Math.max(1, databases.size()),
            r -> {
              Thread t = new Thread(r, "spillway-health-" + threads.incrementAndGet());
              t.setDaemon(true);
              return t;
            });
    for (String db : databases.keySet()) {
      executor.scheduleWithFixedDelay(
          () -> sampleLogged(db), 0, settings.interval().toMillis(), TimeUnit.MILLISECONDS);
    }
  }

  /**
   * One scheduled sample. Whatever it throws is said, once until a sample succeeds again, and the
   * schedule goes on: one that escaped would end it, and the database's state would stay as last
   * read until {@link #STALE_AFTER} turned it UNKNOWN.
   */
  private void sampleLogged(String db) {
    try {
      sampleDatabase(db);
      if (failing.remove(db)) {
        log.info("Health sampling of {} works again", db);
      }
    } catch (RuntimeException | Error e) {
      if (failing.add(db)) {
        log.error("Health sampling of {} failed; it goes on trying: {}", db, e.toString(), e);
      }
    }
  }

  @Override
  public void close() {
    closed = true; // first: a sample the interrupt below fails publishes and says nothing
    if (executor != null) {
      executor.shutdownNow();
    }
    // A sample under way then fails on its closed connection; one it opens after is closed there.
    connections.values().forEach(HealthMonitor::closeQuietly);
    connections.clear();
  }
}
