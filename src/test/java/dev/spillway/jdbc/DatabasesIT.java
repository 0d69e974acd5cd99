package dev.spillway.jdbc;

import static dev.spillway.config.DatabaseConfig.DEFAULT_LOCK_TIMEOUT;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.spillway.testing.EmbeddedInfra;
import dev.spillway.testing.TestSql;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.postgresql.ds.PGSimpleDataSource;

/** A database Spillway cannot reach is named, with what the driver could not do. */
class DatabasesIT {
  private static Databases of(String url) {
    return new Databases(
        List.of(new DatabaseEndpoint("ci", url, "spillway", "pw", 2, DEFAULT_LOCK_TIMEOUT)),
        new SimpleMeterRegistry());
  }

  /**
   * A database out of reach (one a status report asks for, configured but used by no pipeline, say)
   * holds up only its own pool's opening: another database's opens meanwhile.
   */
  @Test
  void should_open_a_pool_while_another_database_keeps_its_own_opening_waiting() throws Exception {
    ServerSocket silentA = new ServerSocket(0);
    ServerSocket silentB = new ServerSocket(0);
    Databases dbs =
        new Databases(
            List.of(DatabasesTest.at("a", silentA), DatabasesTest.at("b", silentB)), null);
    java.net.Socket heldA = null;
    java.net.Socket heldB = null;
    try {
      java.util.concurrent.CompletableFuture<?> a =
          java.util.concurrent.CompletableFuture.runAsync(() -> dbs.dataSource("a"));
      silentA.setSoTimeout(10_000);
      heldA = silentA.accept(); // a's opening waits for an answer that does not come
      java.util.concurrent.CompletableFuture.runAsync(() -> dbs.dataSource("b"));
      silentB.setSoTimeout(5_000);
      heldB = silentB.accept();

      assertThat(a).as("database a's opening still waits").isNotDone();
    } finally {
      // Refused from now on: the openings give up within their 10 s, and the pools close.
      silentA.close();
      silentB.close();
      if (heldA != null) {
        heldA.close();
      }
      if (heldB != null) {
        heldB.close();
      }
      dbs.close();
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

  @Test
  void should_keep_a_socket_factory_the_url_names() {
    try (Databases dbs = of("jdbc:postgresql://db/app?socketFactory=com.example.ProxySockets")) {
      assertThat(((PGSimpleDataSource) dbs.unpooledSource("ci")).getSocketFactory())
          .isEqualTo("com.example.ProxySockets");
    }
    try (Databases dbs = of("jdbc:postgresql://db/app")) {
      assertThat(((PGSimpleDataSource) dbs.unpooledSource("ci")).getSocketFactory())
          .isEqualTo(KeepaliveSocketFactory.class.getName());
    }
  }

  @Test
  void should_open_the_pools_connections_with_a_socket_factory_the_url_names() throws Exception {
    DatabaseEndpoint real = EmbeddedInfra.get().database("keepalive");
    String url = real.url() + "?socketFactory=" + PlainSockets.class.getName();
    try (Databases dbs =
        new Databases(
            List.of(
                new DatabaseEndpoint("ci", url, real.username(), null, 2, DEFAULT_LOCK_TIMEOUT)),
            new SimpleMeterRegistry())) {
      int before = PlainSockets.made.get();
      try (Connection c = dbs.dataSource("ci").getConnection()) {
        assertThat(c.isValid(5)).isTrue();
      }
      assertThat(PlainSockets.made.get())
          .as("the URL's factory made its sockets")
          .isGreaterThan(before);
    }
  }

  @Test
  void should_name_its_sessions_spillway_whatever_application_name_the_url_gives()
      throws Exception {
    DatabaseEndpoint real = EmbeddedInfra.get().database("keepalive");
    String url = real.url() + "?ApplicationName=billing";
    try (Databases dbs =
        new Databases(
            List.of(
                new DatabaseEndpoint("ci", url, real.username(), null, 2, DEFAULT_LOCK_TIMEOUT)),
            new SimpleMeterRegistry())) {
      for (DataSource ds : List.of(dbs.dataSource("ci"), dbs.unpooledSource("ci"))) {
        try (Connection c = ds.getConnection();
            Statement st = c.createStatement();
            ResultSet rs =
                st.executeQuery(
                    "SELECT current_setting('application_name'),"
                        + " current_setting('lock_timeout')")) {
          rs.next();
          assertThat(rs.getString(1)).isEqualTo(Databases.APPLICATION_NAME);
          if (ds == dbs.dataSource("ci")) {
            assertThat(rs.getString(2)).as("the pool's lock timeout kept").isEqualTo("2s");
          }
        }
      }
    }
  }

  @Test
  void should_log_in_with_a_password_the_url_gives_on_every_kind_of_connection() throws Exception {
    DatabaseEndpoint real = EmbeddedInfra.get().database("keepalive");
    String role = "spillway_url_password";
    try (Databases superuser = new Databases(List.of(real), null)) {
      DataSource admin = superuser.unpooledSource("keepalive");
      Path hba = Path.of(TestSql.text(admin, "SHOW hba_file"));
      String before = Files.readString(hba);
      TestSql.exec(
          admin, "DROP ROLE IF EXISTS " + role, "CREATE ROLE " + role + " LOGIN PASSWORD 's3cret'");
      // Only this role must give a password; every other session goes on as before.
      Files.writeString(
          hba,
          "host all "
              + role
              + " 127.0.0.1/32 scram-sha-256\n"
              + "host all "
              + role
              + " ::1/128 scram-sha-256\n"
              + before);
      try {
        TestSql.exec(admin, "SELECT pg_reload_conf()");
        DatabaseEndpoint without =
            new DatabaseEndpoint("ci", real.url(), role, null, 1, DEFAULT_LOCK_TIMEOUT);
        await()
            .atMost(Duration.ofSeconds(10))
            .untilAsserted(
                () ->
                    assertThatThrownBy(
                            () -> {
                              try (Databases dbs = new Databases(List.of(without), null)) {
                                dbs.unpooledSource("ci").getConnection().close();
                              }
                            })
                        .as("a password asked for")
                        .hasMessageContaining("password"));

        DatabaseEndpoint e =
            new DatabaseEndpoint(
                "ci", real.url() + "?password=s3cret", role, null, 2, DEFAULT_LOCK_TIMEOUT);
        try (Databases dbs = new Databases(List.of(e), new SimpleMeterRegistry())) {
          for (DataSource ds : List.of(dbs.dataSource("ci"), dbs.unpooledSource("ci"))) {
            try (Connection c = ds.getConnection()) {
              assertThat(c.isValid(5)).isTrue();
            }
          }
        }
        assertThat(e.password()).as("what capture's connection is given").isEqualTo("s3cret");
      } finally {
        Files.writeString(hba, before);
        TestSql.exec(admin, "SELECT pg_reload_conf()");
      }
    }
  }

  /** A socket factory a URL names, counting the sockets it makes. */
  public static final class PlainSockets extends javax.net.SocketFactory {
    static final java.util.concurrent.atomic.AtomicInteger made =
        new java.util.concurrent.atomic.AtomicInteger();

    @Override
    public java.net.Socket createSocket() {
      made.incrementAndGet();
      return new java.net.Socket();
    }

    @Override
    public java.net.Socket createSocket(String host, int port) throws java.io.IOException {
      throw new java.io.IOException("the driver asks for an unconnected socket");
    }

    @Override
    public java.net.Socket createSocket(
        String host, int port, java.net.InetAddress local, int localPort)
        throws java.io.IOException {
      throw new java.io.IOException("the driver asks for an unconnected socket");
    }

    @Override
    public java.net.Socket createSocket(java.net.InetAddress host, int port)
        throws java.io.IOException {
      throw new java.io.IOException("the driver asks for an unconnected socket");
    }

    @Override
    public java.net.Socket createSocket(
        java.net.InetAddress address, int port, java.net.InetAddress local, int localPort)
        throws java.io.IOException {
      throw new java.io.IOException("the driver asks for an unconnected socket");
    }
  }

  @Test
  void should_probe_the_server_of_every_connection_it_opens_within_seconds() throws Exception {
    assumeTrue(
        runs("ss", "-tnoH", "state", "established"), "ss (iproute2) shows a socket's timers");
    try (Databases databases = EmbeddedInfra.get().databases("keepalive")) {
      for (DataSource ds :
          List.of(databases.dataSource("keepalive"), databases.unpooledSource("keepalive"))) {
        try (Connection c = ds.getConnection();
            Statement s = c.createStatement();
            ResultSet rs =
                s.executeQuery(
                    "SELECT client_port FROM pg_stat_activity WHERE pid = pg_backend_pid()")) {
          rs.next();
          int port = rs.getInt(1);
          // The connection's own socket, by its local port: a keepalive timer of at most 10 s.
          String socket = output("ss", "-tnoH", "state", "established", "sport = :" + port);
          assertThat(socket).contains("timer:(keepalive,");
          assertThat(keepaliveSeconds(socket)).isLessThanOrEqualTo(10.0);
        }
      }
    }
  }

  /**
   * The seconds left on the keepalive timer {@code ss} shows: {@code 9.988ms} on some versions
   * (seconds, mislabelled), {@code 9.988sec} or {@code 9sec} on others, {@code 050ms} under a
   * second, {@code 119min} for the system's two-hour default.
   */
  private static double keepaliveSeconds(String ss) {
    java.util.regex.Matcher m =
        java.util.regex.Pattern.compile("keepalive,(?:(\\d+)min)?([0-9.]+)?(ms|sec)?,").matcher(ss);
    assertThat(m.find()).as(ss).isTrue();
    assertThat(m.group(1) != null || m.group(2) != null).as("a time left in " + ss).isTrue();
    double minutes = m.group(1) == null ? 0 : Double.parseDouble(m.group(1));
    double value = m.group(2) == null ? 0 : Double.parseDouble(m.group(2));
    boolean milliseconds = "ms".equals(m.group(3)) && !m.group(2).contains(".");
    return minutes * 60 + (milliseconds ? value / 1000 : value);
  }

  private static boolean runs(String... command) {
    try {
      return new ProcessBuilder(command).redirectErrorStream(true).start().waitFor() == 0;
    } catch (java.io.IOException | InterruptedException e) {
      return false;
    }
  }

  private static String output(String... command) throws Exception {
    Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes());
    p.waitFor();
    return out;
  }
}
