package dev.spillway.jdbc;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import com.zaxxer.hikari.metrics.micrometer.MicrometerMetricsTrackerFactory;
import io.micrometer.core.instrument.MeterRegistry;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.NoSuchElementException;
import javax.sql.DataSource;
import org.postgresql.ds.PGSimpleDataSource;

/** One HikariCP pool per Spillway database, opened lazily, closed together. Thread-safe. */
public final class Databases implements AutoCloseable {
  /** How long the health monitor's own connection may take to open, in seconds. */
  static final int MONITOR_CONNECT_SECONDS = 5;

  /** How long the health monitor's own connection waits for an answer, in seconds. */
  static final int MONITOR_READ_SECONDS = 10;

  private final Map<String, DatabaseEndpoint> endpoints;
  private final Map<String, HikariDataSource> pools = new LinkedHashMap<>();
  private final MeterRegistry registry;

  public Databases(Collection<DatabaseEndpoint> endpoints, MeterRegistry registry) {
    this.endpoints = new LinkedHashMap<>();
    endpoints.forEach(e -> this.endpoints.put(e.name(), e));
    this.registry = registry;
  }

  public Collection<DatabaseEndpoint> endpoints() {
    return endpoints.values();
  }

  public DatabaseEndpoint endpoint(String name) {
    DatabaseEndpoint e = endpoints.get(name);
    if (e == null) {
      throw new NoSuchElementException("No database named " + name);
    }
    return e;
  }

  public synchronized DataSource dataSource(String name) {
    return pools.computeIfAbsent(name, n -> open(endpoint(n)));
  }

  /**
   * Unpooled connections to the database for the health monitor, which keeps one open: whether it
   * can connect says whether the database is reachable, whatever the pool's workers hold, and it
   * learns so within {@value #MONITOR_CONNECT_SECONDS} s rather than the pool's 30.
   */
  public DataSource monitorSource(String name) {
    DatabaseEndpoint e = endpoint(name);
    PGSimpleDataSource ds = new PGSimpleDataSource();
    ds.setURL(e.url());
    ds.setUser(e.username());
    ds.setPassword(e.password());
    ds.setApplicationName("spillway");
    ds.setConnectTimeout(MONITOR_CONNECT_SECONDS);
    ds.setLoginTimeout(MONITOR_CONNECT_SECONDS);
    ds.setSocketTimeout(MONITOR_READ_SECONDS);
    return ds;
  }

  private HikariDataSource open(DatabaseEndpoint e) {
    HikariConfig c = new HikariConfig();
    c.setPoolName("spillway-" + e.name());
    c.setJdbcUrl(e.url());
    c.setUsername(e.username());
    c.setPassword(e.password());
    c.setMaximumPoolSize(e.poolSize());
    c.setMinimumIdle(1);
    c.addDataSourceProperty("ApplicationName", "spillway");
    if (!e.lockTimeout().isZero()) {
      // Every statement of Spillway's gives up a lock wait after this (SQLSTATE 55P03): the sink
      // ends such a run unfinished and puts its batch back, behind other work.
      c.setConnectionInitSql(
          "SET lock_timeout = '" + Math.max(1, e.lockTimeout().toMillis()) + "ms'");
    }
    // Fail fast at start-up when the database is unreachable rather than on first use.
    c.setInitializationFailTimeout(10_000);
    if (registry != null) {
      c.setMetricsTrackerFactory(new MicrometerMetricsTrackerFactory(registry));
    }
    return new HikariDataSource(c);
  }

  @Override
  public synchronized void close() {
    pools.values().forEach(HikariDataSource::close);
    pools.clear();
  }
}
