package dev.spillway.buffers;

import dev.spillway.event.TableName;
import dev.spillway.support.Backoff;
import java.time.Duration;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * One buffer table as configured under {@code buffers:}.
 *
 * @param name the key under {@code buffers:}; names its topics, metrics and status line
 * @param table the buffer table ({@code table:}, default the name)
 * @param database the database holding it
 * @param batchSize most events in one batch
 * @param maxWait a batch closes at the latest this long after its first event arrived
 * @param maxAttempts handler calls for one batch before what is left goes to the dead-letter topic
 * @param retryBackoff pause before the second call; doubles per call up to a minute, unless the
 *     handler says how long to wait (HTTP {@code Retry-After})
 * @param archiveTable handled rows are copied there before they are deleted, in one statement
 * @param maxInFlight batches whose handler runs at once in this process
 * @param rateLimit handler calls per second at most, evenly spaced; empty for no limit
 * @param origin where it was configured, for errors found at start-up (a missing table)
 */
public record BufferSettings(
    String name,
    TableName table,
    String database,
    int batchSize,
    Duration maxWait,
    HandlerSpec handler,
    int maxAttempts,
    Duration retryBackoff,
    OnExhausted onExhausted,
    Optional<TableName> archiveTable,
    int maxInFlight,
    Optional<Double> rateLimit,
    Origin origin) {
  public static final int DEFAULT_BATCH_SIZE = 1000;
  public static final Duration DEFAULT_MAX_WAIT = Duration.ofSeconds(2);
  public static final int DEFAULT_MAX_ATTEMPTS = 5;
  public static final Duration DEFAULT_RETRY_BACKOFF = Duration.ofSeconds(1);
  public static final Duration MAX_RETRY_BACKOFF = Duration.ofMinutes(1);

  /** The longest a handler's own retry time ({@code Retry-After}) is waited for. */
  public static final Duration MAX_RETRY_AFTER = Duration.ofHours(1);

  public static final OnExhausted DEFAULT_ON_EXHAUSTED = OnExhausted.DELETE;
  public static final int DEFAULT_MAX_IN_FLIGHT = 2;

  /** The file, line and key a buffer was configured at. */
  public record Origin(String source, int line, String key, Map<String, Integer> lines) {
    public Origin {
      lines = Map.copyOf(lines);
    }

    public Origin(String source, int line, String key) {
      this(source, line, key, Map.of());
    }

    /** The line of the buffer's key {@code name}, or of the buffer when it has none. */
    public int line(String name) {
      return lines.getOrDefault(name, line);
    }
  }

  public BufferSettings {
    Objects.requireNonNull(name, "name");
    Objects.requireNonNull(table, "table");
    Objects.requireNonNull(database, "database");
    Objects.requireNonNull(maxWait, "maxWait");
    Objects.requireNonNull(handler, "handler");
    Objects.requireNonNull(retryBackoff, "retryBackoff");
    Objects.requireNonNull(onExhausted, "onExhausted");
    Objects.requireNonNull(archiveTable, "archiveTable");
    Objects.requireNonNull(rateLimit, "rateLimit");
    Objects.requireNonNull(origin, "origin");
    if (batchSize < 1 || maxAttempts < 1 || maxInFlight < 1) {
      throw new IllegalArgumentException("batch-size, max-attempts and max-in-flight must be ≥ 1");
    }
  }

  /** Defaults for everything but what has none: the name, table, database and handler. */
  public static BufferSettings of(String name, TableName table, String database, HandlerSpec h) {
    return new BufferSettings(
        name,
        table,
        database,
        DEFAULT_BATCH_SIZE,
        DEFAULT_MAX_WAIT,
        h,
        DEFAULT_MAX_ATTEMPTS,
        DEFAULT_RETRY_BACKOFF,
        DEFAULT_ON_EXHAUSTED,
        Optional.empty(),
        DEFAULT_MAX_IN_FLIGHT,
        Optional.empty(),
        new Origin("(code)", 0, "buffers." + name));
  }

  public BufferSettings withBatching(int size, Duration wait) {
    return new BufferSettings(
        name,
        table,
        database,
        size,
        wait,
        handler,
        maxAttempts,
        retryBackoff,
        onExhausted,
        archiveTable,
        maxInFlight,
        rateLimit,
        origin);
  }

  public BufferSettings withAttempts(int attempts, Duration backoff, OnExhausted exhausted) {
    return new BufferSettings(
        name,
        table,
        database,
        batchSize,
        maxWait,
        handler,
        attempts,
        backoff,
        exhausted,
        archiveTable,
        maxInFlight,
        rateLimit,
        origin);
  }

  public BufferSettings withArchive(TableName archive) {
    return new BufferSettings(
        name,
        table,
        database,
        batchSize,
        maxWait,
        handler,
        maxAttempts,
        retryBackoff,
        onExhausted,
        Optional.of(archive),
        maxInFlight,
        rateLimit,
        origin);
  }

  /**
   * @param perSecond null for no limit
   */
  public BufferSettings withConcurrency(int inFlight, Double perSecond) {
    return new BufferSettings(
        name,
        table,
        database,
        batchSize,
        maxWait,
        handler,
        maxAttempts,
        retryBackoff,
        onExhausted,
        archiveTable,
        inFlight,
        Optional.ofNullable(perSecond),
        origin);
  }

  /**
   * The pause before call {@code attempt + 1}: the handler's own time when it names one ahead (at
   * most {@link #MAX_RETRY_AFTER}), else the backoff. A time of zero or already passed names no
   * wait, so it gets the backoff: a receiver answering {@code 503} with {@code Retry-After: 0}
   * through a deploy would otherwise have every attempt spent within milliseconds.
   */
  public Duration retryWait(int attempt, Duration after) {
    if (!namesAWait(after)) {
      return backoff(attempt);
    }
    return after.compareTo(MAX_RETRY_AFTER) > 0 ? MAX_RETRY_AFTER : after;
  }

  /** Whether a retry's own time ({@code Retry-After}) asks for a wait: one of more than zero. */
  static boolean namesAWait(Duration after) {
    return after != null && after.compareTo(Duration.ZERO) > 0;
  }

  /** The pause before call {@code attempt + 1} when the handler names none. */
  public Duration backoff(int attempt) {
    return Backoff.doubling(retryBackoff, attempt, MAX_RETRY_BACKOFF);
  }
}
