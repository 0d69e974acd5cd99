package dev.spillway.support;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class AllAtOnceTest {
  @Test
  void should_run_on_every_part_at_the_same_time_and_return_once_all_have_ended() {
    CountDownLatch bothStarted = new CountDownLatch(2);
    Map<String, Boolean> sawTheOther = new ConcurrentHashMap<>();

    AllAtOnce.run(
        List.of("a", "b"),
        p -> "part-" + p,
        p -> {
          bothStarted.countDown();
          try {
            // One after another, the first would wait here for the second in vain.
            sawTheOther.put(p, bothStarted.await(10, TimeUnit.SECONDS));
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          }
        });

    assertThat(sawTheOther).containsOnly(Map.entry("a", true), Map.entry("b", true));
  }

  @Test
  void should_wait_for_every_part_even_when_interrupted_and_keep_the_interrupt() {
    CountDownLatch release = new CountDownLatch(1);
    Map<String, Boolean> ended = new ConcurrentHashMap<>();
    Thread.currentThread().interrupt();

    AllAtOnce.run(
        List.of("a", "b"),
        p -> "part-" + p,
        p -> {
          try {
            release.countDown();
            ended.put(p, release.await(10, TimeUnit.SECONDS));
          } catch (InterruptedException e) {
            ended.put(p, false);
          }
        });

    assertThat(Thread.interrupted()).as("the caller's interrupt, kept").isTrue();
    assertThat(ended).containsOnly(Map.entry("a", true), Map.entry("b", true));
  }
}
