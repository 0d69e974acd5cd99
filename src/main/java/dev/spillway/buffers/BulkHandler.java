package dev.spillway.buffers;

import dev.spillway.event.BufferEvent;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;

/**
 * What a buffer does with a batch of its rows: one bulk operation (an HTTP call, a statement, a
 * client library's bulk method). Spillway deletes the rows the handler reports as done, retries the
 * rest, and dead-letters what is left after the buffer's {@code max-attempts}.
 *
 * <p>Implementations named by {@code handler.class} need a public constructor without arguments.
 * One instance serves every batch of its buffer, from up to {@code max-in-flight} threads at once:
 * it must be thread-safe. A batch can be handled more than once (after a crash, or when the rows'
 * deletion failed), always with the same {@link Batch#groupId()}: receivers that can should use it
 * to ignore repeats.
 */
public interface BulkHandler extends AutoCloseable {

  /** Handles one batch; an exception counts as a retryable failure of the whole batch. */
  Result handle(Batch batch) throws Exception;

  /** Called once when the pipeline stops. */
  @Override
  default void close() throws Exception {}

  /**
   * One batch as a handler sees it.
   *
   * @param buffer the buffer's name
   * @param groupId the idempotency key: the same for every delivery of this batch
   * @param attempt 1 for the batch's first call, then 2, 3…, numbered on across runs of the batch
   *     in this process (a run ended between calls, by a stop or health at STOP); from 1 again in
   *     another process, after a restart, or in a replay
   * @param idColumn the buffer table's primary-key column
   * @param rows the rows still in the buffer table, in insert order, each every column by name in
   *     the table's column order
   */
  record Batch(
      String buffer, String groupId, int attempt, String idColumn, List<Map<String, Object>> rows) {
    public Batch {
      Objects.requireNonNull(groupId, "groupId");
      rows = List.copyOf(rows);
    }

    static Batch of(
        String buffer, String groupId, int attempt, String idColumn, List<BufferEvent> events) {
      List<Map<String, Object>> rows = new ArrayList<>(events.size());
      events.forEach(e -> rows.add(e.row()));
      return new Batch(buffer, groupId, attempt, idColumn, rows);
    }

    /** The ids of {@link #rows()}, in the same order. */
    public List<Object> ids() {
      List<Object> ids = new ArrayList<>(rows.size());
      rows.forEach(r -> ids.add(r.get(idColumn)));
      return ids;
    }
  }

  /** How a batch went: all done, some done, or none done (worth retrying or not). */
  sealed interface Result {
    /** Every row is done. */
    record Success() implements Result {}

    /**
     * Only these rows are done (ids compared by their text, bytea ids by their bytes); the rest are
     * retried.
     *
     * @param reason why the rest failed, for the dead-letter topic
     */
    record Partial(Set<?> succeededIds, String reason) implements Result {
      public Partial {
        succeededIds = Set.copyOf(succeededIds);
        Objects.requireNonNull(reason, "reason");
      }
    }

    /**
     * Nothing done, worth trying again.
     *
     * @param after how long to wait first (HTTP {@code Retry-After}); null, zero or negative for
     *     the buffer's backoff
     */
    record Retry(String reason, Duration after) implements Result {
      public Retry {
        Objects.requireNonNull(reason, "reason");
      }
    }

    /**
     * Nothing done, and trying again would not help: what is left goes to the dead-letter topic.
     */
    record Reject(String reason) implements Result {
      public Reject {
        Objects.requireNonNull(reason, "reason");
      }
    }

    static Result success() {
      return new Success();
    }

    static Result partial(Set<?> succeededIds, String reason) {
      return new Partial(succeededIds, reason);
    }

    static Result retry(String reason) {
      return new Retry(reason, null);
    }

    static Result reject(String reason) {
      return new Reject(reason);
    }
  }
}
