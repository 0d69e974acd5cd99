package dev.spillway.cli;

import dev.spillway.support.ShutdownHooks;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * Turns SIGINT/SIGTERM into an interruption of a command's thread and holds the JVM's exit until
 * the command has wound up (recorded what it did, said so), or {@code windUp} passed, whichever
 * comes first. Closing it ends the hold and takes the hook away.
 */
final class OnSignal implements AutoCloseable {
  private final Thread command;
  private final Duration windUp;
  private final CountDownLatch woundUp = new CountDownLatch(1);
  private final Thread hook;

  private OnSignal(Thread command, Duration windUp) {
    this.command = command;
    this.windUp = windUp;
    this.hook = new Thread(this::signalled, "spillway-signal");
  }

  /** Interrupts the calling thread on a signal, then waits up to {@code windUp} for the close. */
  static OnSignal interruptingThisThread(Duration windUp) {
    OnSignal onSignal = new OnSignal(Thread.currentThread(), windUp);
    Runtime.getRuntime().addShutdownHook(onSignal.hook);
    return onSignal;
  }

  /** What the hook does: the command is interrupted, and the exit waits for its wind-up. */
  void signalled() {
    command.interrupt();
    try {
      woundUp.await(windUp.toMillis(), TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  @Override
  public void close() {
    woundUp.countDown();
    ShutdownHooks.remove(hook);
  }
}
