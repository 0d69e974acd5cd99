package dev.spillway.config;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Properties;
import java.util.logging.Handler;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import java.util.logging.SimpleFormatter;
import java.util.regex.Pattern;
import org.postgresql.Driver;
import org.postgresql.PGProperty;
import org.postgresql.hostchooser.HostRequirement;
import org.postgresql.jdbc.GSSEncMode;
import org.postgresql.jdbc.SslMode;
import org.postgresql.util.PSQLException;

/**
 * A PostgreSQL database Spillway reads from or writes to. {@link #toString()} never shows the
 * password, neither this one nor one written into the URL.
 *
 * @param name Spillway's name for it, {@code [a-z][a-z0-9_]*}; also part of slot names
 * @param url {@code jdbc:postgresql://host:port/dbname}
 * @param username the role Spillway logs in as
 * @param password null when the server needs none (or the URL or a pgpass file provides it)
 * @param poolSize connections in its pool, 1..200
 * @param lockTimeout longest one of Spillway's statements waits for a lock before giving up (the
 *     run ends unfinished and the batch goes back); zero for no limit
 */
public record DatabaseConfig(
    String name, String url, String username, String password, int poolSize, Duration lockTimeout) {
  public static final int DEFAULT_POOL_SIZE = 10;

  /**
   * Short, so a statement of Spillway's that waits for an application's lock never holds its own
   * place in the table's lock queue for long: a schema change's ACCESS EXCLUSIVE request, and
   * everything behind that, would wait as long.
   */
  public static final Duration DEFAULT_LOCK_TIMEOUT = Duration.ofSeconds(2);

  static final int MAX_POOL_SIZE = 200;
  static final String URL_PREFIX = "jdbc:postgresql:";
  private static final String DRIVER_LOGGER = "org.postgresql";

  /**
   * Settings the driver reads as whole numbers at every connection. Not every setting whose default
   * is one: {@code protocolVersion} takes 3.2, {@code loginTimeout} a fraction.
   */
  private static final List<PGProperty> WHOLE_NUMBERS =
      List.of(
          PGProperty.CONNECT_TIMEOUT,
          PGProperty.SOCKET_TIMEOUT,
          PGProperty.CANCEL_SIGNAL_TIMEOUT,
          PGProperty.PREPARE_THRESHOLD,
          PGProperty.DEFAULT_ROW_FETCH_SIZE,
          PGProperty.PREPARED_STATEMENT_CACHE_QUERIES);

  /** A {@code %} that does not begin an escape: the driver refuses the URL without a word. */
  private static final Pattern BROKEN_ESCAPE = Pattern.compile("%(?![0-9A-Fa-f]{2})");

  /** A user name or password before the host, which the driver does not read there. */
  private static final Pattern USER_INFO = Pattern.compile("^jdbc:postgresql://[^/?]*@");

  static final Pattern NAME = Pattern.compile("[a-z][a-z0-9_]*");
  private static final Pattern URL_PASSWORD =
      Pattern.compile("(?i)(password=)[^&;]*|(//[^/@:]*:)[^/@]*@");

  /**
   * @throws IllegalArgumentException when the name, URL or pool size breaks the rules above
   */
  public DatabaseConfig {
    Objects.requireNonNull(name, "name");
    Objects.requireNonNull(url, "url");
    Objects.requireNonNull(username, "username");
    Objects.requireNonNull(lockTimeout, "lockTimeout");
    if (!NAME.matcher(name).matches()) {
      throw new IllegalArgumentException("database name must match " + NAME + ": " + name);
    }
    if (!url.startsWith(URL_PREFIX)) {
      throw new IllegalArgumentException("url must start with " + URL_PREFIX);
    }
    if (poolSize < 1 || poolSize > MAX_POOL_SIZE) {
      throw new IllegalArgumentException("poolSize must be between 1 and " + MAX_POOL_SIZE);
    }
    if (lockTimeout.isNegative()) {
      throw new IllegalArgumentException("lockTimeout must not be negative");
    }
  }

  /**
   * The {@code databases:} section, from its entries as {@link ConfigNode#children} hands them out;
   * file order is kept.
   */
  static Map<String, DatabaseConfig> allFrom(Map<String, ConfigNode> entries) {
    Map<String, DatabaseConfig> out = new LinkedHashMap<>();
    entries.forEach((name, node) -> out.put(name, from(name, node)));
    return Collections.unmodifiableMap(out);
  }

  /** One entry of {@code databases:}. */
  static DatabaseConfig from(String name, ConfigNode n) {
    if (!NAME.matcher(name).matches()) {
      throw n.invalid(
          "is not a valid database name (lower-case letters, digits and '_', starting with a"
              + " letter)");
    }
    String url = n.requiredString("url");
    if (!url.startsWith(URL_PREFIX)) {
      throw n.error("url", "must be a PostgreSQL JDBC URL starting with " + URL_PREFIX);
    }
    String unreadable = driversObjection(url);
    if (unreadable != null) {
      throw n.error("url", "is not one the PostgreSQL driver reads: " + unreadable);
    }
    DatabaseConfig c =
        new DatabaseConfig(
            name,
            url,
            n.requiredString("username"),
            n.optionalString("password").orElse(null),
            n.integer("pool-size", DEFAULT_POOL_SIZE, 1, MAX_POOL_SIZE),
            n.postgresTimeout("lock-timeout", DEFAULT_LOCK_TIMEOUT));
    n.finish();
    return c;
  }

  /**
   * Why the PostgreSQL driver cannot read {@code url} (a port that is not a number from 1 to 65535,
   * a broken {@code %}-escape), in its own words; null when it can. The driver logs its reason
   * rather than throwing it: it is caught here, so the configuration error says it once instead of
   * a log line before it, and pools, capture and status never meet the URL unread.
   */
  static String driversObjection(String url) {
    if (USER_INFO.matcher(url).find()) {
      return "a user name or password before the host, which it does not take there; give them as"
          + " username: and password:";
    }
    if (BROKEN_ESCAPE.matcher(url).find()) {
      return "a '%' that begins no %-escape (two hex digits); write %25 for a '%' (in a password,"
          + " say)";
    }
    Logger driver = Logger.getLogger(DRIVER_LOGGER);
    List<String> said = new ArrayList<>();
    Handler keep =
        new Handler() {
          @Override
          public void publish(LogRecord r) {
            said.add(new SimpleFormatter().formatMessage(r));
          }

          @Override
          public void flush() {}

          @Override
          public void close() {}
        };
    boolean toParents = driver.getUseParentHandlers();
    driver.addHandler(keep);
    driver.setUseParentHandlers(false);
    Properties settings;
    try {
      settings = Driver.parseURL(url, new Properties());
    } finally {
      driver.removeHandler(keep);
      driver.setUseParentHandlers(toParents);
    }
    if (settings == null) {
      // Its words may quote the URL, which may hold a password.
      return said.isEmpty()
          ? "it refuses it"
          : redacted(String.join("; ", said).strip().replace(url, redacted(url)));
    }
    return settingsObjection(settings);
  }

  /**
   * What the driver would refuse of the URL's settings only when it connects, without a word sent
   * to the server: a misspelt {@code sslmode}, {@code gssEncMode} or {@code targetServerType}, a
   * setting that takes a number given something else. Null when none.
   */
  private static String settingsObjection(Properties settings) {
    try {
      SslMode.of(settings);
      GSSEncMode.of(settings);
      String target = PGProperty.TARGET_SERVER_TYPE.getOrDefault(settings);
      try {
        HostRequirement.getTargetServerType(target);
      } catch (IllegalArgumentException unknown) {
        return "Invalid targetServerType value: " + target;
      }
      for (PGProperty p : WHOLE_NUMBERS) {
        if (p.isPresent(settings)) {
          p.getInt(settings);
        }
      }
      return null;
    } catch (PSQLException refused) {
      return refused.getMessage();
    }
  }

  /** The URL with any password in it shown as {@code ****}: for logs, status and pages. */
  public static String redacted(String url) {
    return URL_PASSWORD.matcher(url).replaceAll(m -> m.group(1) != null ? "$1****" : "$2****@");
  }

  /**
   * {@code main (jdbc:postgresql://db1/app as spillway, password ****, pool 10)}, and the lock
   * timeout when it is not the default.
   */
  @Override
  public String toString() {
    return name
        + " ("
        + redacted(url)
        + " as "
        + username
        + (password == null ? "" : ", password ****")
        + ", pool "
        + poolSize
        + (lockTimeout.equals(DEFAULT_LOCK_TIMEOUT)
            ? ""
            : lockTimeout.isZero()
                ? ", no lock timeout"
                : ", lock timeout " + DurationText.format(lockTimeout))
        + ")";
  }
}
