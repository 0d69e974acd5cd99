package dev.spillway.support;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;
import java.util.function.Function;

/**
 * Does one thing to several parts at the same time and waits until it is done to each: closes that
 * may each wait a while (for Kafka while it is away, say) then take as long as the longest, not as
 * long as all of them together.
 */
public final class AllAtOnce {
  private AllAtOnce() {}

  /**
   * Runs {@code action} on each part, each on a thread of its own, and returns once every one has
   * ended. The action must end by itself: an interrupt of the caller is kept for after the wait.
   *
   * @param name the name of a part's thread
   */
  public static <T> void run(List<T> parts, Function<T, String> name, Consumer<T> action) {
    if (parts.size() == 1) {
      action.accept(parts.get(0));
      return;
    }
    List<Thread> running = new ArrayList<>();
    for (T p : parts) {
      Thread t = new Thread(() -> action.accept(p), name.apply(p));
      t.start();
      running.add(t);
    }
    boolean interrupted = false;
    for (Thread t : running) {
      while (t.isAlive()) {
        try {
          t.join();
        } catch (InterruptedException e) {
          interrupted = true;
        }
      }
    }
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
  }
}
