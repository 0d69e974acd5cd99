package dev.spillway.jdbc;

import static dev.spillway.config.DatabaseConfig.DEFAULT_LOCK_TIMEOUT;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.spillway.testing.EmbeddedInfra;
import dev.spillway.testing.TestSql;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.net.ServerSocket;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.List;
import org.junit.jupiter.api.Test;

/** A database Spillway cannot reach is named, with what the driver could not do. */
class DatabasesIT {
  private static Databases of(String url) {
    return new Databases(
        List.of(new DatabaseEndpoint("ci", url, "spillway", "pw", 2, DEFAULT_LOCK_TIMEOUT)),
        new SimpleMeterRegistry());
  }

  @Test
  void should_read_committed_whatever_the_databases_default() throws Exception {
    try (Databases admin = EmbeddedInfra.get().databases("iso_default")) {
      TestSql.exec(
          admin.dataSource("iso_default"),
          "ALTER DATABASE iso_default SET default_transaction_isolation = 'repeatable read'");
    }
    try (Databases dbs = EmbeddedInfra.get().databases("iso_default");
        Connection c = dbs.dataSource("iso_default").getConnection();
        Statement s = c.createStatement();
        ResultSet rs = s.executeQuery("SHOW transaction_isolation")) {
      rs.next();
      assertThat(rs.getString(1)).isEqualTo("read committed");
    }
  }

  @Test
  void should_name_the_database_a_refused_connection_was_for() throws Exception {
    int closed;
    try (ServerSocket s = new ServerSocket(0)) {
      closed = s.getLocalPort();
    }
    try (Databases dbs = of("jdbc:postgresql://localhost:" + closed + "/builds")) {
      assertThatThrownBy(() -> dbs.dataSource("ci"))
          .hasMessageStartingWith(
              "Spillway cannot connect to database ci (localhost:"
                  + closed
                  + "/builds): Connection to"
                  + " localhost:"
                  + closed
                  + " refused");
    }
  }

  @Test
  void should_say_which_host_is_unknown() {
    try (Databases dbs = of("jdbc:postgresql://no-such-host.invalid:5432/builds")) {
      assertThatThrownBy(() -> dbs.dataSource("ci"))
          .hasMessage(
              "Spillway cannot connect to database ci (no-such-host.invalid:5432/builds): The connection"
                  + " attempt failed: unknown host no-such-host.invalid");
    }
  }
}
