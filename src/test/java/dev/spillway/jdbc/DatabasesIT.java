package dev.spillway.jdbc;

import static dev.spillway.config.DatabaseConfig.DEFAULT_LOCK_TIMEOUT;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.net.ServerSocket;
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
