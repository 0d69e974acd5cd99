package dev.spillway.health;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Clock;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

class StandardIndicatorsTest {
  @Test
  void should_grade_above_each_threshold() {
    assertThat(StandardIndicators.grade(5, 10, 20, "x")).isEqualTo(Health.NORMAL);
    assertThat(StandardIndicators.grade(10, 10, 20, "x")).isEqualTo(Health.NORMAL);
    assertThat(StandardIndicators.grade(11, 10, 20, "x")).isEqualTo(new Health.Throttle("x"));
    assertThat(StandardIndicators.grade(21, 10, 20, "x")).isEqualTo(new Health.Stop("x"));
  }

  @Test
  void should_grade_sub_batch_latency_against_its_target() throws Exception {
    AtomicReference<Double> p95 = new AtomicReference<>(Double.NaN);
    HealthIndicator latency =
        StandardIndicators.forDatabase(
                HealthThresholds.defaults(), null, Clock.systemUTC(), p95::get)
            .stream()
            .filter(i -> i.name().equals("sub-batch-latency"))
            .findFirst()
            .orElseThrow();
    assertThat(latency.sample(null, null)).isEqualTo(Health.NORMAL);
    p95.set(0.5);
    assertThat(latency.sample(null, null)).isEqualTo(Health.NORMAL);
    p95.set(1.5);
    assertThat(latency.sample(null, null)).isInstanceOf(Health.Throttle.class);
    p95.set(4.5);
    assertThat(latency.sample(null, null))
        .isEqualTo(new Health.Stop("sub-batch p95 4500 ms against a 1000 ms target"));
  }

  @Test
  void should_grade_connections_against_those_max_connections_leaves_unreserved() {
    StandardIndicators.Connections connections =
        new StandardIndicators.Connections(HealthThresholds.defaults());

    // 20 in all, 3 for superusers: ordinary roles are refused from the 17th on.
    assertThat(connections.graded(17, 20, 3))
        .isEqualTo(
            new Health.Stop("100% in use of the 17 connections max_connections leaves unreserved"));
    assertThat(connections.graded(16, 20, 3).label()).as("16 of 20 is 80%%").isEqualTo("THROTTLE");
    assertThat(connections.graded(12, 20, 3).label()).isEqualTo("NORMAL");
    assertThat(connections.graded(12, 20, 0).label()).isEqualTo("NORMAL");
    assertThat(connections.graded(20, 20, 0).label()).isEqualTo("STOP");
  }

  @Test
  void should_grade_replay_lag_against_thresholds_below_a_second() {
    StandardIndicators.ReplicationLag lag =
        new StandardIndicators.ReplicationLag(
            Thresholds.replicationLag(Duration.ofMillis(500), Duration.ofMillis(1500)));

    assertThat(lag.graded(0.2, 0)).isEqualTo(Health.NORMAL);
    assertThat(lag.graded(0.7, 0).label()).isEqualTo("THROTTLE");
    assertThat(lag.graded(1.6, 0).label()).isEqualTo("STOP");
  }
}
