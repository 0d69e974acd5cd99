package dev.spillway.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;

class OnSignalTest {
  @Test
  void should_interrupt_the_command_and_hold_the_exit_until_it_wound_up() throws Exception {
    CountDownLatch started = new CountDownLatch(1);
    CountDownLatch windUp = new CountDownLatch(1);
    AtomicBoolean interrupted = new AtomicBoolean();
    CompletableFuture<OnSignal> signal = new CompletableFuture<>();
    Thread command =
        new Thread(
            () -> {
              try (OnSignal s = OnSignal.interruptingThisThread(Duration.ofMinutes(1))) {
                signal.complete(s);
                started.countDown();
                try {
                  new CountDownLatch(1).await();
                } catch (InterruptedException e) {
                  interrupted.set(true);
                  // Winding up: the hook must still be waiting.
                  windUp.await();
                }
              } catch (InterruptedException e) {
                throw new IllegalStateException(e);
              }
            });
    command.start();
    assertThat(started.await(10, TimeUnit.SECONDS)).isTrue();

    CompletableFuture<Void> hook = CompletableFuture.runAsync(() -> signal.join().signalled());
    // The command is interrupted, and the hook waits for its wind-up.
    await(interrupted);
    assertThat(hook).isNotDone();
    windUp.countDown();
    hook.get(10, TimeUnit.SECONDS);
    command.join(10_000);
    assertThat(command.isAlive()).isFalse();
  }

  @Test
  void should_not_hold_the_exit_longer_than_the_wind_up_allows() throws Exception {
    try (OnSignal s = OnSignal.interruptingThisThread(Duration.ofMillis(50))) {
      // Never closed while the hook waits: it gives up after 50 ms (join: this thread is the one
      // interrupted).
      CompletableFuture.runAsync(s::signalled).orTimeout(10, TimeUnit.SECONDS).join();
      assertThat(Thread.interrupted()).as("this thread was interrupted").isTrue();
    }
  }

  private static void await(AtomicBoolean flag) {
    org.awaitility.Awaitility.await().atMost(Duration.ofSeconds(10)).untilTrue(flag);
  }
}
