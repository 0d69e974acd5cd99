package dev.spillway.jdbc;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import com.zaxxer.hikari.metrics.micrometer.MicrometerMetricsTrackerFactory;
import com.zaxxer.hikari.pool.HikariPool;
import dev.spillway.support.Causes;
import io.micrometer.core.instrument.MeterRegistry;
import java.net.UnknownHostException;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.concurrent.ConcurrentHashMap;
import javax.sql.DataSource;
import org.postgresql.ds.PGSimpleDataSource;

/** One HikariCP pool per Spillway database, opened lazily, closed together. Thread-safe. */
public final class Databases implements AutoCloseable {
  /** How long the health monitor's own connection may take to open, in seconds. */
  static final int MONITOR_CONNECT_SECONDS = 5;

  /** How long the health monitor's own connection waits for an answer, in seconds. */
  static final int MONITOR_READ_SECONDS = 10;

  private final Map<String, DatabaseEndpoint> endpoints;
  private final Map<String, Pool> pools = new ConcurrentHashMap<>();
  private volatile boolean closed;
  private final MeterRegistry registry;

  /**
   * The {@code application_name} of every session of Spillway's, whatever the URL names: the health
   * check leaves sessions of this name out of the lock waits it counts.
   */
  public static final String APPLICATION_NAME = "spillway";

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

  /**
   * The pool of database {@code name}, opened at its first use: an opening waits for its database
   * alone (up to 10 s for one out of reach), not for another's.
   *
   * @throws IllegalStateException once closed, rather than open a pool nothing would close
   */
  public DataSource dataSource(String name) {
    return pools.computeIfAbsent(name, n -> new Pool(endpoint(n))).get();
  }

  /** One database's pool, opened once under its own lock. */
  private final class Pool {
    private final DatabaseEndpoint endpoint;
    private HikariDataSource open;

    Pool(DatabaseEndpoint endpoint) {
      this.endpoint = endpoint;
    }

    synchronized HikariDataSource get() {
      if (closed) {
        throw new IllegalStateException("The database pools are closed: Spillway is stopping");
      }
      if (open == null) {
        open = open(endpoint);
      }
      return open;
    }

    synchronized void close() {
      if (open != null) {
        open.close();
        open = null;
      }
    }
  }

  /**
   * Unpooled connections to the database. The health monitor keeps one open: whether it can connect
   * says whether the database is reachable, whatever the pool's workers hold, and it learns so
   * within {@value #MONITOR_CONNECT_SECONDS} s rather than the pool's 30. Capture holds one while
   * it starts, for a lock it keeps while using the pool.
   */
  public DataSource unpooledSource(String name) {
    DatabaseEndpoint e = endpoint(name);
    PGSimpleDataSource ds = new PGSimpleDataSource();
    ds.setURL(e.url());
    ds.setUser(e.username());
    ds.setPassword(e.password());
    ds.setApplicationName(APPLICATION_NAME); // set after the URL, so it wins over the URL's
    ds.setConnectTimeout(MONITOR_CONNECT_SECONDS);
    ds.setLoginTimeout(MONITOR_CONNECT_SECONDS);
    ds.setSocketTimeout(MONITOR_READ_SECONDS);
    KeepaliveSocketFactory.driverSettings(e)
        .forEach(
            (key, value) -> {
              try {
                ds.setProperty(key, value);
              } catch (SQLException unknown) {
                throw new IllegalStateException(unknown); // the driver's own setting names
              }
            });
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
    c.addDataSourceProperty("ApplicationName", APPLICATION_NAME);
    // A server that vanishes mid-statement is noticed within about 25 s (KeepaliveSocketFactory).
    KeepaliveSocketFactory.driverSettings(e).forEach(c::addDataSourceProperty);
    // The name is set again by each new session, since an ApplicationName in the URL wins over the
    // property: health tells Spillway's own sessions (and their lock waits) apart by it. Every
    // statement of Spillway's gives up a lock wait after lock_timeout (SQLSTATE 55P03): the sink
    // ends such a run unfinished and puts its batch back, behind other work.
    c.setConnectionInitSql(
        "SELECT set_config('application_name', '"
            + APPLICATION_NAME
            + "', false)"
            + (e.lockTimeout().isZero()
                ? ""
                : ", set_config('lock_timeout', '"
                    + Math.max(1, e.lockTimeout().toMillis())
                    + "ms', false)"));
    // Fail fast at start-up when the database is unreachable rather than on first use.
    c.setInitializationFailTimeout(10_000);
    if (registry != null) {
      c.setMetricsTrackerFactory(new MicrometerMetricsTrackerFactory(registry));
    }
    try {
      return new HikariDataSource(c);
    } catch (HikariPool.PoolInitializationException failed) {
      throw new IllegalStateException(
          "Spillway cannot connect to database "
              + e.name()
              + " ("
              + e.host()
              + ":"
              + e.port()
              + "/"
              + e.databaseName()
              + "): "
              + reason(failed.getCause() == null ? failed : failed.getCause()),
          failed);
    }
  }

  /**
   * The driver's words, with what they leave out: "The connection attempt failed." says neither
   * that the host is unknown nor which.
   */
  private static String reason(Throwable error) {
    List<String> parts = new ArrayList<>();
    for (Throwable t : Causes.chain(error)) {
      String m = t.getMessage();
      if (t instanceof UnknownHostException) {
        parts.add("unknown host " + m);
      } else if (m != null && !m.isBlank() && parts.stream().noneMatch(p -> p.contains(m))) {
        parts.add(m.lines().findFirst().orElse(m).strip());
      }
    }
    return parts.isEmpty()
        ? error.getClass().getSimpleName()
        : String.join(": ", parts).replaceAll("\\.: ", ": ");
  }

  @Override
  public void close() {
    closed = true;
    pools.values().forEach(Pool::close);
  }
}
