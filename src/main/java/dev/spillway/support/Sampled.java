package dev.spillway.support;

import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.Optional;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A value read from a database for what must answer within a bound whatever the database does: a
 * metrics scrape, the status report. A database that is down, or a pool whose connections are all
 * at work, holds a read for as long as the pool waits for a connection (30 s), which would outlast
 * a scraper's timeout and make every series vanish just when they matter.
 *
 * <p>{@link #get(Duration)} starts a read unless one runs and waits for it a while, then answers
 * with the newest value read (or failure), or nothing when none is younger than {@code keptFor}. A
 * read that takes longer goes on in the background, one at a time per value, on daemon threads
 * shared by every sampled value; calls meanwhile answer at once, and a call after it ends finds its
 * result.
 */
public final class Sampled<T> {
  private static final AtomicInteger THREADS = new AtomicInteger();

  private static final ExecutorService READERS =
      Executors.newCachedThreadPool(
          r -> {
            Thread t = new Thread(r, "spillway-sampler-" + THREADS.incrementAndGet());
            t.setDaemon(true);
            return t;
          });

  private final Callable<T> read;
  private final Duration keptFor;
  private final Clock clock;

  private Reading<T> latest; // guarded by this
  private boolean reading; // guarded by this

  /** A read: its value, or why it failed, and when it ended. */
  public record Reading<T>(T value, String error, Instant at) {}

  /**
   * @param read reads the value, blocking as long as it takes
   * @param keptFor how long a value is answered with after it was read
   */
  public Sampled(Callable<T> read, Duration keptFor, Clock clock) {
    this.read = read;
    this.keptFor = keptFor;
    this.clock = clock;
  }

  /**
   * Reads the value, waiting at most {@code wait} for the read (or for one already under way).
   *
   * @return the newest read younger than {@code keptFor}: this one when it ended in time
   */
  public Optional<Reading<T>> get(Duration wait) {
    long until = System.nanoTime() + wait.toNanos();
    synchronized (this) {
      // Only a read this call starts is waited for: one under way already (a database away, a
      // pool at work) would cost every caller its wait, and a scrape asking many values the sum.
      if (!reading) {
        reading = true;
        try {
          READERS.execute(this::readOnce);
        } catch (RuntimeException e) { // no thread to be had
          reading = false;
          throw e;
        }
        try {
          while (reading && System.nanoTime() < until) {
            TimeUnit.NANOSECONDS.timedWait(this, Math.max(1, until - System.nanoTime()));
          }
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
      Instant now = clock.instant();
      return Optional.ofNullable(latest).filter(r -> r.at().plus(keptFor).isAfter(now));
    }
  }

  private void readOnce() {
    Reading<T> r = null;
    try {
      r = new Reading<>(read.call(), null, clock.instant());
    } catch (Exception e) {
      r = new Reading<>(null, Causes.message(e), clock.instant());
    } finally {
      // An Error too ends the read: the next call starts another.
      synchronized (this) {
        if (r != null) {
          latest = r;
        }
        reading = false;
        notifyAll();
      }
    }
  }
}
