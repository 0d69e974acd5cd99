package dev.spillway.jdbc;

import java.time.Duration;
import java.util.Objects;
import java.util.Properties;
import org.postgresql.Driver;

/**
 * Where one Spillway database lives.
 *
 * @param name Spillway's name for it ({@code main}, {@code ci}, …)
 * @param url JDBC URL, {@code jdbc:postgresql://host:port/dbname}
 * @param username login role
 * @param password may be null; when it is, the URL's {@code password} parameter, if any, stands in:
 *     the pool's driver reads it there, but capture's replication connection and the unpooled
 *     connections take it from here
 * @param poolSize connections in its pool
 * @param lockTimeout PostgreSQL's {@code lock_timeout} for the pool's connections; zero for none
 */
public record DatabaseEndpoint(
    String name, String url, String username, String password, int poolSize, Duration lockTimeout) {
  public DatabaseEndpoint {
    Objects.requireNonNull(name, "name");
    Objects.requireNonNull(url, "url");
    Objects.requireNonNull(username, "username");
    Objects.requireNonNull(lockTimeout, "lockTimeout");
    if (password == null) {
      Properties p = Driver.parseURL(url, new Properties());
      password = p == null ? null : p.getProperty("password");
    }
  }

  /** Host, port and database name as the PostgreSQL driver reads them from the URL. */
  public Properties parsedUrl() {
    Properties p = Driver.parseURL(url, new Properties());
    if (p == null) {
      throw new IllegalArgumentException("Not a PostgreSQL JDBC URL: " + url);
    }
    return p;
  }

  public String host() {
    return parsedUrl().getProperty("PGHOST", "localhost").split(",")[0];
  }

  public int port() {
    return Integer.parseInt(parsedUrl().getProperty("PGPORT", "5432").split(",")[0]);
  }

  public String databaseName() {
    return parsedUrl().getProperty("PGDBNAME");
  }

  @Override
  public String toString() {
    return name + " (" + url + " as " + username + ")";
  }
}
