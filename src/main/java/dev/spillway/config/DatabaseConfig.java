package dev.spillway.config;

import java.util.Objects;
import java.util.regex.Pattern;

/**
 * A PostgreSQL database Spillway reads from or writes to.
 *
 * @param name Spillway's name for it, {@code [a-z][a-z0-9_]*}
 * @param url {@code jdbc:postgresql://host:port/dbname}
 * @param password may be null
 * @param poolSize connections in its pool
 */
public record DatabaseConfig(
    String name, String url, String username, String password, int poolSize) {
  public static final int DEFAULT_POOL_SIZE = 10;
  static final Pattern NAME = Pattern.compile("[a-z][a-z0-9_]*");

  public DatabaseConfig {
    Objects.requireNonNull(name, "name");
    Objects.requireNonNull(url, "url");
    Objects.requireNonNull(username, "username");
  }

  static DatabaseConfig from(String name, ConfigNode n) {
    String url = n.requiredString("url");
    if (!url.startsWith("jdbc:postgresql:")) {
      throw n.error("url", "must be a PostgreSQL JDBC URL starting with jdbc:postgresql:");
    }
    DatabaseConfig c =
        new DatabaseConfig(
            name,
            url,
            n.requiredString("username"),
            n.optionalString("password").orElse(null),
            n.integer("pool-size", DEFAULT_POOL_SIZE, 1, 200));
    n.finish();
    return c;
  }

  @Override
  public String toString() {
    return name
        + " ("
        + url
        + " as "
        + username
        + (password == null ? "" : ", password ****")
        + ")";
  }
}
