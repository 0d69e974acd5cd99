package dev.spillway.cli;

import dev.spillway.runtime.SpillwayRuntime;
import java.io.PrintWriter;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * Keeps a runtime up until SIGINT/SIGTERM or until one of its parts fails. On a signal the JVM's
 * shutdown hook closes the runtime in order (capture first, broker last), so acknowledged work is
 * never lost.
 */
final class UntilStopped {
  private UntilStopped() {}

  static int await(SpillwayRuntime runtime, PrintWriter out) throws InterruptedException {
    CountDownLatch stopped = new CountDownLatch(1);
    Thread hook =
        new Thread(
            () -> {
              runtime.close();
              stopped.countDown();
            },
            "spillway-shutdown");
    Runtime.getRuntime().addShutdownHook(hook);
    out.printf(
        "Spillway is running: metrics and status on http://localhost:%d (Ctrl+C stops it).%n",
        runtime.httpPort());
    out.flush();
    while (!stopped.await(1, TimeUnit.SECONDS)) {
      Optional<String> failure = runtime.failure();
      if (failure.isPresent()) {
        Runtime.getRuntime().removeShutdownHook(hook);
        runtime.close();
        throw new IllegalStateException(failure.get());
      }
    }
    return ErrorHandler.OK;
  }
}
