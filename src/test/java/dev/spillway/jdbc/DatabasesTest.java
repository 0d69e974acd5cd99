package dev.spillway.jdbc;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.net.ServerSocket;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

class DatabasesTest {
  /** Database {@code name} as one listening, or once listening, on {@code server}'s port. */
  static DatabaseEndpoint at(String name, ServerSocket server) {
    return new DatabaseEndpoint(
        name,
        "jdbc:postgresql://localhost:" + server.getLocalPort() + "/app",
        "spillway",
        null,
        1,
        Duration.ZERO);
  }

  @Test
  void should_open_no_pool_once_closed() throws Exception {
    ServerSocket gone = new ServerSocket(0);
    gone.close(); // refused at once, should a pool be opened
    Databases dbs = new Databases(List.of(at("a", gone)), null);
    dbs.close();
    assertThatThrownBy(() -> dbs.dataSource("a"))
        .isInstanceOf(IllegalStateException.class)
        .hasMessage("The database pools are closed: Spillway is stopping");
  }
}
