package dev.spillway.sink;

import java.util.Map;
import java.util.Optional;

/**
 * What a pipeline runs for one batch: decode it, then modify rows in sub-batches, calling {@link
 * RunContext#checkpoint()} before each one so health, limits and shutdown can end the run between
 * sub-batches. Every statement must be idempotent: a batch may run again after a crash, a STOP or a
 * limit.
 *
 * <p>Called from the sink's worker threads, one batch per thread at a time.
 */
public interface BatchHandler {
  /**
   * The database and table the batch works on, read from the record; empty when the record is
   * malformed ({@link #execute} then reports the problem).
   */
  Optional<Target> target(SinkRecord record);

  /**
   * Runs the batch. Exceptions are classified like failures ({@link SqlErrors}); returning an
   * outcome says more.
   */
  Outcome execute(SinkRecord record, RunContext context) throws Exception;

  /**
   * Told after a run that reached a limit was put back: behind other work ({@code delayed} false)
   * or on the delay topic after the configured attempts; also after a paused run's rest was put
   * back behind other work. For a pipeline's own metrics.
   *
   * @param attempts the attempts the batch now carries: 0 when delayed, which starts them again
   */
  default void requeued(SinkRecord record, int attempts, boolean delayed) {}

  /**
   * Headers the record's dead letter carries beside its failure, each replacing one of its name the
   * record had: what the pipeline left of the batch, for a replay to read. Also asked for a batch
   * of the delay topic dead-lettered because its batches topic is gone. None by default.
   */
  default Map<String, byte[]> deadLetterHeaders(SinkRecord record, Throwable error) {
    return Map.of();
  }

  /**
   * Called once the record (or the value a {@link Outcome.PermanentFailure} named) is in the
   * dead-letter topic and before its offset is committed, from the thread that ran it. An exception
   * leaves the offset uncommitted, so the batch runs again. Does nothing by default.
   *
   * @param value what went to the dead-letter topic: the record's value or the one named
   */
  default void deadLettered(SinkRecord record, byte[] value, Throwable error) throws Exception {}
}
