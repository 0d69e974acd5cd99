package dev.spillway.config;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.regex.Pattern;

/**
 * A PostgreSQL database Spillway reads from or writes to. {@link #toString()} never shows the
 * password, neither this one nor one written into the URL.
 *
 * @param name Spillway's name for it, {@code [a-z][a-z0-9_]*}; also part of slot names
 * @param url {@code jdbc:postgresql://host:port/dbname}
 * @param username the role Spillway logs in as
 * @param password null when the server needs none (or the URL or a pgpass file provides it)
 * @param poolSize connections in its pool, 1..200
 */
public record DatabaseConfig(
    String name, String url, String username, String password, int poolSize) {
  public static final int DEFAULT_POOL_SIZE = 10;
  static final int MAX_POOL_SIZE = 200;
  static final String URL_PREFIX = "jdbc:postgresql:";
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
    if (!NAME.matcher(name).matches()) {
      throw new IllegalArgumentException("database name must match " + NAME + ": " + name);
    }
    if (!url.startsWith(URL_PREFIX)) {
      throw new IllegalArgumentException("url must start with " + URL_PREFIX);
    }
    if (poolSize < 1 || poolSize > MAX_POOL_SIZE) {
      throw new IllegalArgumentException("poolSize must be between 1 and " + MAX_POOL_SIZE);
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
    DatabaseConfig c =
        new DatabaseConfig(
            name,
            url,
            n.requiredString("username"),
            n.optionalString("password").orElse(null),
            n.integer("pool-size", DEFAULT_POOL_SIZE, 1, MAX_POOL_SIZE));
    n.finish();
    return c;
  }

  /** {@code main (jdbc:postgresql://db1/app as spillway, password ****, pool 10)}. */
  @Override
  public String toString() {
    return name
        + " ("
        + URL_PASSWORD.matcher(url).replaceAll(m -> m.group(1) != null ? "$1****" : "$2****@")
        + " as "
        + username
        + (password == null ? "" : ", password ****")
        + ", pool "
        + poolSize
        + ")";
  }
}
