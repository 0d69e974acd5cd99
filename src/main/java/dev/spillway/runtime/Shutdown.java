package dev.spillway.runtime;

import dev.spillway.support.AllAtOnce;
import java.util.ArrayList;
import java.util.Deque;
import java.util.Iterator;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Stops what a runtime started, the last started first. Parts of a kind whose closes are
 * independent of one another and may each wait a while (a Streams application or a sink worker
 * pool, 30 s and more each when Kafka is away) close together, when the first of them is reached,
 * so their waits do not add up.
 */
final class Shutdown {
  private static final Logger log = LoggerFactory.getLogger(Shutdown.class);

  private Shutdown() {}

  /**
   * Empties {@code started} (the last started on top), closing each part. A part whose close ends
   * with an {@link Error} (out of memory, a class that no longer loads) does not keep the others
   * from stopping, the embedded servers among them: the error is thrown once all have stopped.
   *
   * @param together the kinds whose parts close at the same time
   */
  static void inReverse(Deque<AutoCloseable> started, Set<Class<?>> together) {
    List<Error> errors = new CopyOnWriteArrayList<>();
    Consumer<AutoCloseable> stop =
        part -> {
          try {
            stop(part);
          } catch (Error e) {
            log.error("Stopping {} failed", part.getClass().getSimpleName(), e);
            errors.add(e);
          }
        };
    while (!started.isEmpty()) {
      AutoCloseable part = started.pop();
      if (!together.contains(part.getClass())) {
        stop.accept(part);
        continue;
      }
      List<AutoCloseable> kind = new ArrayList<>(List.of(part));
      for (Iterator<AutoCloseable> i = started.iterator(); i.hasNext(); ) {
        AutoCloseable p = i.next();
        if (p.getClass() == part.getClass()) {
          kind.add(p);
          i.remove();
        }
      }
      AllAtOnce.run(kind, p -> "spillway-stop-" + p.getClass().getSimpleName(), stop);
    }
    if (!errors.isEmpty()) {
      Error first = errors.get(0);
      errors.subList(1, errors.size()).forEach(first::addSuppressed);
      throw first;
    }
  }

  /** Closes the part; a failure is logged, and what was started before still stops. */
  static void stop(AutoCloseable part) {
    try {
      part.close();
    } catch (Exception e) {
      log.warn("Stopping {} failed: {}", part.getClass().getSimpleName(), e.getMessage());
    }
  }
}
