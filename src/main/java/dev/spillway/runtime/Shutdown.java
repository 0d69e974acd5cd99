package dev.spillway.runtime;

import dev.spillway.support.AllAtOnce;
import java.util.ArrayList;
import java.util.Deque;
import java.util.Iterator;
import java.util.List;
import java.util.Set;
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
   * Empties {@code started} (the last started on top), closing each part.
   *
   * @param together the kinds whose parts close at the same time
   */
  static void inReverse(Deque<AutoCloseable> started, Set<Class<?>> together) {
    while (!started.isEmpty()) {
      AutoCloseable part = started.pop();
      if (!together.contains(part.getClass())) {
        stop(part);
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
      AllAtOnce.run(kind, p -> "spillway-stop-" + p.getClass().getSimpleName(), Shutdown::stop);
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
