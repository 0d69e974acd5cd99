package dev.spillway.health;

import static org.assertj.core.api.Assertions.assertThat;

import dev.spillway.event.TableName;
import dev.spillway.testing.SettableClock;
import dev.spillway.testing.TableIndicator;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;

class HealthMonitorTest {
  private static final String DB = "main";
  private static final TableName WATCHED = TableName.parse("public.merge_requests");
  private static final TableName NEW = TableName.parse("public.ci_builds");

  private final SettableClock clock = new SettableClock(Instant.parse("2026-01-01T00:00:00Z"));
  private final ManualIndicator operator = new ManualIndicator();

  @Test
  void should_start_a_newly_watched_table_where_its_database_stands_during_a_hold() {
    try (HealthMonitor monitor = monitor(Duration.ofSeconds(30))) {
      monitor.state(DB, WATCHED);
      operator.set(new Health.Stop("an operator's switch"));
      monitor.runOnce();
      operator.set(Health.NORMAL);
      clock.advance(Duration.ofSeconds(1));
      monitor.runOnce(); // better samples from here on, held for 30 s

      assertThat(monitor.state(DB, NEW).label()).isEqualTo("STOP");
      clock.advance(Duration.ofSeconds(1));
      monitor.runOnce(); // the first sample of the new table, 2 s into the hold

      assertThat(monitor.state(DB, null).label()).isEqualTo("STOP");
      assertThat(monitor.state(DB, WATCHED).label()).isEqualTo("STOP");
      assertThat(monitor.state(DB, NEW).label()).isEqualTo("STOP");

      clock.advance(Duration.ofSeconds(29));
      monitor.runOnce(); // the hold is over for all of them at once

      assertThat(monitor.states())
          .extracting(s -> s.table() + " " + s.health().label())
          .containsExactly("null NORMAL", NEW + " NORMAL", WATCHED + " NORMAL");
    }
  }

  @Test
  void should_read_unknown_until_its_first_sample_is_in() {
    try (HealthMonitor monitor = monitor(Duration.ofSeconds(30))) {
      assertThat(monitor.state(DB, null)).isEqualTo(HealthMonitor.NOT_SAMPLED);
      assertThat(monitor.state(DB, WATCHED)).isEqualTo(HealthMonitor.NOT_SAMPLED);
      assertThat(monitor.state("other", null))
          .as("a database it does not watch")
          .isEqualTo(Health.NORMAL);

      monitor.runOnce();

      assertThat(monitor.state(DB, null)).isEqualTo(Health.NORMAL);
      assertThat(monitor.state(DB, WATCHED)).isEqualTo(Health.NORMAL);
    }
  }

  @Test
  void should_read_unknown_once_no_sample_has_come_in_for_long() {
    try (HealthMonitor monitor = monitor(Duration.ofSeconds(30))) {
      monitor.state(DB, WATCHED);
      monitor.runOnce();
      clock.advance(HealthMonitor.STALE_AFTER);

      assertThat(monitor.state(DB, WATCHED)).isEqualTo(Health.NORMAL);

      clock.advance(Duration.ofSeconds(1));

      assertThat(monitor.state(DB, null))
          .isEqualTo(new Health.Unknown("no health sample of main for 31 s"));
      assertThat(monitor.state(DB, WATCHED).label()).isEqualTo("UNKNOWN");
      assertThat(monitor.states()).extracting(s -> s.health().label()).containsOnly("UNKNOWN");

      operator.set(new Health.Stop("an operator's switch"));
      monitor.runOnce();
      clock.advance(Duration.ofMinutes(5));

      assertThat(monitor.state(DB, WATCHED))
          .as("a stop read long ago stays a stop")
          .isEqualTo(new Health.Stop("manual: an operator's switch"));

      operator.set(Health.NORMAL);
      monitor.runOnce();
      clock.advance(Duration.ofSeconds(30));
      monitor.runOnce();

      assertThat(monitor.state(DB, WATCHED)).isEqualTo(Health.NORMAL);
    }
  }

  @Test
  void should_get_better_only_after_a_hold_once_samples_come_in_again_after_a_stale_spell() {
    try (HealthMonitor monitor = monitor(Duration.ofSeconds(30))) {
      monitor.state(DB, WATCHED);
      monitor.runOnce();
      clock.advance(HealthMonitor.STALE_AFTER.plusSeconds(5)); // sampling stuck meanwhile
      assertThat(monitor.state(DB, WATCHED).label()).isEqualTo("UNKNOWN");

      monitor.runOnce(); // it answers again, all NORMAL
      clock.advance(Duration.ofSeconds(29));
      monitor.runOnce();

      assertThat(monitor.states())
          .as("still held")
          .extracting(s -> s.health().label())
          .containsOnly("UNKNOWN");
      assertThat(monitor.state(DB, null))
          .isEqualTo(new Health.Unknown("no health sample of main for 35 s"));

      clock.advance(Duration.ofSeconds(1));
      monitor.runOnce();

      assertThat(monitor.states()).extracting(s -> s.health().label()).containsOnly("NORMAL");
    }
  }

  @Test
  void should_leave_out_a_throttle_a_table_is_exempt_from_but_not_a_stop() {
    TableIndicator autovacuum =
        new TableIndicator(StandardIndicators.AUTOVACUUM, new Health.Throttle("runs"));
    try (HealthMonitor monitor = monitor(Duration.ZERO)) {
      monitor.addIndicators(DB, List.of(autovacuum));
      monitor.exemptFromThrottle(DB, WATCHED, StandardIndicators.AUTOVACUUM);
      monitor.state(DB, WATCHED);
      monitor.state(DB, NEW);
      monitor.runOnce();

      assertThat(monitor.state(DB, WATCHED)).isEqualTo(Health.NORMAL);
      assertThat(monitor.state(DB, NEW)).isEqualTo(new Health.Throttle("autovacuum: runs"));
      assertThat(monitor.readings())
          .as("its reading still shows")
          .contains(
              new HealthMonitor.Reading(
                  DB, WATCHED, "autovacuum", new Health.Throttle("autovacuum: runs")));

      operator.set(new Health.Throttle("an operator's switch"));
      monitor.runOnce();

      assertThat(monitor.state(DB, WATCHED))
          .as("other indicators still count")
          .isEqualTo(new Health.Throttle("manual: an operator's switch"));

      operator.set(Health.NORMAL);
      autovacuum.set(new Health.Stop("to prevent wraparound"));
      monitor.runOnce();

      assertThat(monitor.state(DB, WATCHED))
          .isEqualTo(new Health.Stop("autovacuum: to prevent wraparound"));
    }
  }

  @Test
  void should_keep_an_indicators_stop_while_it_cannot_be_read_and_lift_it_once_read_again() {
    java.util.concurrent.atomic.AtomicReference<Health> archive =
        new java.util.concurrent.atomic.AtomicReference<>(new Health.Stop("backlog 50"));
    HealthIndicator failing =
        new HealthIndicator() {
          @Override
          public String name() {
            return "wal-archive";
          }

          @Override
          public Health sample(Connection connection, TableName table) {
            Health h = archive.get();
            if (h == null) {
              throw new IllegalStateException("canceling statement due to statement timeout");
            }
            return h;
          }
        };
    try (HealthMonitor monitor = monitor(Duration.ofSeconds(30))) {
      monitor.addIndicators(DB, List.of(failing));
      monitor.runOnce();
      archive.set(null); // its query times out from now on
      for (int s = 0; s < 40; s++) {
        clock.advance(Duration.ofSeconds(1));
        monitor.runOnce();
      }

      assertThat(monitor.state(DB, null))
          .as("40 s unread, longer than the hold")
          .isEqualTo(
              new Health.Stop(
                  "wal-archive: backlog 50 (last read; wal-archive could not be read: canceling"
                      + " statement due to statement timeout)"));

      archive.set(Health.NORMAL);
      monitor.runOnce();
      clock.advance(Duration.ofSeconds(30));
      monitor.runOnce();

      assertThat(monitor.state(DB, null)).isEqualTo(Health.NORMAL);
    }
  }

  @Test
  void should_go_on_sampling_after_an_indicator_throws_an_error() throws InterruptedException {
    CountDownLatch samplesAfterTheError = new CountDownLatch(2);
    AtomicBoolean thrown = new AtomicBoolean();
    HealthIndicator failingOnce =
        new HealthIndicator() {
          @Override
          public String name() {
            return "failing-once";
          }

          @Override
          public Health sample(Connection connection, TableName table) {
            if (thrown.compareAndSet(false, true)) {
              throw new AssertionError("an indicator's defect");
            }
            samplesAfterTheError.countDown();
            return Health.NORMAL;
          }
        };
    try (HealthMonitor monitor =
        new HealthMonitor(
            new HealthMonitor.Settings(
                Duration.ofMillis(10), Duration.ZERO, HealthThresholds.defaults()),
            Map.of(DB, answering()),
            clock,
            new SimpleMeterRegistry())) {
      monitor.addIndicators(DB, List.of(failingOnce));
      monitor.start();

      assertThat(samplesAfterTheError.await(30, TimeUnit.SECONDS))
          .as("sampled again after the error")
          .isTrue();
      assertThat(thrown).isTrue();
    }
  }

  @Test
  void should_show_indicators_it_cannot_read_while_the_database_is_away_as_unknown() {
    AtomicBoolean away = new AtomicBoolean();
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    try (HealthMonitor monitor =
        new HealthMonitor(
            new HealthMonitor.Settings(
                Duration.ofSeconds(1), Duration.ZERO, HealthThresholds.defaults()),
            Map.of(DB, answeringUnless(away)),
            clock,
            registry)) {
      monitor.addIndicators(DB, List.of(operator));
      operator.set(new Health.Stop("an operator's switch"));
      monitor.runOnce();
      assertThat(state(registry, "manual")).as("stop").isEqualTo(3);

      away.set(true);
      monitor.runOnce();

      assertThat(state(registry, "connection")).as("stop").isEqualTo(3);
      assertThat(state(registry, "manual"))
          .as("unknown, not the stop it read before the database went away")
          .isEqualTo(2);
    }
  }

  @Test
  void should_show_unknown_on_its_gauges_once_no_sample_has_come_in_for_long() {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    try (HealthMonitor monitor =
        new HealthMonitor(
            new HealthMonitor.Settings(
                Duration.ofSeconds(1), Duration.ZERO, HealthThresholds.defaults()),
            Map.of(DB, answering()),
            clock,
            registry)) {
      monitor.addIndicators(DB, List.of(operator));
      monitor.state(DB, WATCHED);
      monitor.runOnce();
      assertThat(state(registry, "combined")).isZero();

      clock.advance(HealthMonitor.STALE_AFTER.plusSeconds(1)); // sampling stuck meanwhile

      assertThat(monitor.state(DB, null).label()).isEqualTo("UNKNOWN");
      assertThat(state(registry, "combined")).as("as state() reads").isEqualTo(2);
      assertThat(state(registry, "manual")).isEqualTo(2);
      assertThat(state(registry, WATCHED, "combined")).isEqualTo(2);

      operator.set(new Health.Stop("an operator's switch"));
      monitor.runOnce();
      clock.advance(Duration.ofMinutes(5));

      assertThat(state(registry, "combined")).as("a stop read long ago stays a stop").isEqualTo(3);
    }
  }

  private static double state(SimpleMeterRegistry registry, String indicator) {
    return state(registry, null, indicator);
  }

  private static double state(SimpleMeterRegistry registry, TableName table, String indicator) {
    return registry
        .get("spillway_health_state")
        .tag("database", DB)
        .tag("table", table == null ? "" : table.toString())
        .tag("indicator", indicator)
        .gauge()
        .value();
  }

  private HealthMonitor monitor(Duration hold) {
    HealthMonitor monitor =
        new HealthMonitor(
            new HealthMonitor.Settings(Duration.ofSeconds(1), hold, HealthThresholds.defaults()),
            Map.of(DB, answering()),
            clock,
            new SimpleMeterRegistry());
    monitor.addIndicators(DB, List.of(operator));
    return monitor;
  }

  /**
   * A database that is always there: its connection answers the monitor's checks, and the manual
   * indicator reads nothing through it.
   */
  private static DataSource answering() {
    return answeringUnless(new AtomicBoolean());
  }

  /** A statement that takes the monitor's session limits and nothing else. */
  private static java.sql.Statement settingLimits() {
    return (java.sql.Statement)
        Proxy.newProxyInstance(
            HealthMonitorTest.class.getClassLoader(),
            new Class<?>[] {java.sql.Statement.class},
            (proxy, method, args) ->
                switch (method.getName()) {
                  case "execute" -> {
                    assertThat(args[0]).isEqualTo(HealthMonitor.SESSION_LIMITS);
                    yield true;
                  }
                  case "close" -> null;
                  default -> throw new UnsupportedOperationException(method.getName());
                });
  }

  /** The same, gone while {@code away} holds: its connection invalid, no new one to be had. */
  private static DataSource answeringUnless(AtomicBoolean away) {
    Connection connection =
        (Connection)
            Proxy.newProxyInstance(
                HealthMonitorTest.class.getClassLoader(),
                new Class<?>[] {Connection.class},
                (proxy, method, args) ->
                    switch (method.getName()) {
                      case "isValid" -> !away.get();
                      case "getAutoCommit" -> true;
                      case "setAutoCommit", "close" -> null;
                      case "createStatement" -> settingLimits();
                      default -> throw new UnsupportedOperationException(method.getName());
                    });
    return (DataSource)
        Proxy.newProxyInstance(
            HealthMonitorTest.class.getClassLoader(),
            new Class<?>[] {DataSource.class},
            (proxy, method, args) -> {
              if (method.getName().equals("getConnection")) {
                if (away.get()) {
                  throw new java.sql.SQLException("Connection refused", "08001");
                }
                return connection;
              }
              throw new UnsupportedOperationException(method.getName());
            });
  }
}
