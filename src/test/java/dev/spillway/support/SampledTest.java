package dev.spillway.support;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

import dev.spillway.testing.SettableClock;
import java.sql.SQLException;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

class SampledTest {
  private static final Duration LONG = Duration.ofSeconds(30);

  @Test
  void should_answer_with_a_read_that_ends_in_time() {
    AtomicInteger reads = new AtomicInteger();
    Sampled<Integer> sampled =
        new Sampled<>(reads::incrementAndGet, Duration.ofMinutes(1), Clock.systemUTC());

    assertThat(sampled.get(LONG)).get().extracting(Sampled.Reading::value).isEqualTo(1);
    assertThat(sampled.get(LONG))
        .as("read again")
        .get()
        .extracting(Sampled.Reading::value)
        .isEqualTo(2);
  }

  @Test
  void should_not_wait_past_its_bound_for_a_read_that_hangs_and_answer_with_it_once_it_ends()
      throws Exception {
    CountDownLatch release = new CountDownLatch(1);
    AtomicInteger reads = new AtomicInteger();
    Sampled<Integer> sampled =
        new Sampled<>(
            () -> {
              reads.incrementAndGet();
              release.await();
              return 7;
            },
            Duration.ofMinutes(1),
            Clock.systemUTC());

    assertTimeoutPreemptively(
        Duration.ofSeconds(10),
        () -> {
          assertThat(sampled.get(Duration.ofMillis(20))).as("nothing read yet").isEmpty();
          // A read under way is not waited for: a scrape of many values would wait them all.
          assertThat(sampled.get(LONG)).isEmpty();
        });
    assertThat(reads).as("one read at a time").hasValue(1);

    release.countDown();
    // The read ends on its own thread: a call before that still answers at once, with nothing.
    await()
        .atMost(Duration.ofSeconds(10))
        .untilAsserted(
            () ->
                assertThat(sampled.get(Duration.ZERO))
                    .get()
                    .extracting(Sampled.Reading::value)
                    .isEqualTo(7));
  }

  @Test
  void should_read_again_after_a_read_that_ended_with_an_error() {
    AtomicInteger reads = new AtomicInteger();
    Sampled<Integer> sampled =
        new Sampled<>(
            () -> {
              if (reads.incrementAndGet() == 1) {
                throw new NoClassDefFoundError("a driver class");
              }
              return 3;
            },
            Duration.ofMinutes(1),
            Clock.systemUTC());

    assertThat(sampled.get(LONG)).as("nothing read").isEmpty();
    assertThat(sampled.get(LONG)).get().extracting(Sampled.Reading::value).isEqualTo(3);
  }

  @Test
  void should_say_why_a_read_failed() {
    Sampled<Integer> sampled =
        new Sampled<>(
            () -> {
              throw new SQLException("Connection is not available, request timed out");
            },
            Duration.ofMinutes(1),
            Clock.systemUTC());

    assertThat(sampled.get(LONG))
        .get()
        .satisfies(r -> assertThat(r.value()).isNull())
        .extracting(Sampled.Reading::error)
        .asString()
        .contains("Connection is not available");
  }

  @Test
  void should_answer_with_nothing_once_the_last_read_is_older_than_kept() throws Exception {
    SettableClock clock = new SettableClock(Instant.parse("2026-01-01T00:00:00Z"));
    CountDownLatch hang = new CountDownLatch(1);
    AtomicInteger reads = new AtomicInteger();
    Sampled<Integer> sampled =
        new Sampled<>(
            () -> {
              if (reads.incrementAndGet() > 1) {
                hang.await(); // the database went away
              }
              return 5;
            },
            Duration.ofMinutes(1),
            clock);
    try {
      assertThat(sampled.get(LONG)).get().extracting(Sampled.Reading::value).isEqualTo(5);

      clock.advance(Duration.ofSeconds(59));
      assertThat(sampled.get(Duration.ofMillis(20)))
          .as("the last value, while the new read hangs")
          .get()
          .extracting(Sampled.Reading::value)
          .isEqualTo(5);

      clock.advance(Duration.ofSeconds(2));
      assertThat(sampled.get(Duration.ofMillis(20))).as("older than a minute").isEmpty();
    } finally {
      hang.countDown();
    }
  }
}
