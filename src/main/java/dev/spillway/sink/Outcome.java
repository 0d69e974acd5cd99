package dev.spillway.sink;

import java.util.Objects;

/** How one run of a batch ended; the sink worker decides what happens to its record from this. */
public sealed interface Outcome {
  /** Everything done: the offset is committed. */
  record Done(long rows) implements Outcome {}

  /**
   * A per-run limit (rows or runtime) stopped the run with work left: the batch goes back behind
   * other work with one more attempt, or to the delay topic after the configured attempts.
   */
  record LimitReached(long rows, String limit) implements Outcome {
    public LimitReached {
      Objects.requireNonNull(limit);
    }
  }

  /**
   * Health said STOP, or the worker is stopping: the run ended between sub-batches. Nothing is
   * committed and the batch runs again from the start (statements are idempotent), unless the run
   * names its rest: then just that goes back to the end of the batch's topic, with the same
   * attempts, and the offset is committed. A run names its rest when running the done part again
   * would repeat it.
   *
   * @param rest what is left of the batch, as a value of its topic, or null to run it all again
   */
  record Paused(String reason, byte[] rest) implements Outcome {
    public Paused {
      Objects.requireNonNull(reason);
    }

    public Paused(String reason) {
      this(reason, null);
    }
  }

  /**
   * A statement gave up waiting for a lock on {@code table} at the database's lock timeout: the run
   * ended unfinished through no fault of the batch nor its size. It waits on the delay topic,
   * longer each time in a row (the retry backoff, doubling, up to the configured delay), and runs
   * again; its attempts are not counted.
   */
  record LockTimeout(long rows, String table) implements Outcome {
    public LockTimeout {
      Objects.requireNonNull(table);
    }
  }

  /**
   * Worth trying again after a pause (a deadlock, a lost connection, a timeout); once the retries
   * are spent, the record goes to the dead-letter topic.
   *
   * @param deadLetter the value to dead-letter then instead of the record as received (what is left
   *     of the batch), or null for the record as received
   */
  record RetryableFailure(Throwable error, byte[] deadLetter) implements Outcome {
    public RetryableFailure {
      Objects.requireNonNull(error);
    }

    public RetryableFailure(Throwable error) {
      this(error, null);
    }
  }

  /**
   * Will fail again however often it runs: the record goes to the dead-letter topic.
   *
   * @param deadLetter the value to dead-letter instead of the record as received (say, only the
   *     part of the batch that failed), or null for the record as received
   */
  record PermanentFailure(Throwable error, byte[] deadLetter) implements Outcome {
    public PermanentFailure {
      Objects.requireNonNull(error);
    }

    public PermanentFailure(Throwable error) {
      this(error, null);
    }
  }
}
