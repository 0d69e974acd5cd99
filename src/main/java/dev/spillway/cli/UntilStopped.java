package dev.spillway.cli;

import dev.spillway.runtime.SpillwayRuntime;
import java.io.PrintWriter;
import java.time.Duration;
import java.util.Optional;

/**
 * Keeps a runtime up until SIGINT/SIGTERM or until one of its parts fails. On a signal the
 * runtime's shutdown hook closes it in order (capture first, broker last), so acknowledged work is
 * never lost.
 */
final class UntilStopped {
  private UntilStopped() {}

  static int await(SpillwayRuntime runtime, PrintWriter out) throws InterruptedException {
    out.printf(
        "Spillway is running: metrics and status on http://localhost:%d (Ctrl+C stops it).%n",
        runtime.httpPort());
    out.flush();
    while (!runtime.awaitClosed(Duration.ofSeconds(1))) {
      Optional<String> failure = runtime.failure();
      if (failure.isPresent()) {
        Optional<RuntimeException> cause = runtime.failureCause();
        runtime.close();
        throw new IllegalStateException(failure.get(), cause.orElse(null));
      }
    }
    return ErrorHandler.OK;
  }
}
