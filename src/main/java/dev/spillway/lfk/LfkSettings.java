package dev.spillway.lfk;

import dev.spillway.config.ConfigNode;
import dev.spillway.config.SinkSection;
import dev.spillway.sink.SinkSettings;
import java.time.Duration;
import java.util.List;

/**
 * How loose-foreign-key cleanup batches and runs, from the {@code loose-foreign-keys:} section.
 * Defaults are GitLab's: statements of 1,000 deletes or 500 updates, runs that stop at 100,000
 * deletes, 50,000 updates or 30 seconds, and a batch delayed after 3 unfinished runs.
 *
 * @param batchSize most deleted parent rows in one cleanup batch
 * @param maxWait longest a deleted row waits for its batch to fill before the batch goes anyway
 * @param deleteLimit rows per delete statement, unless a definition sets {@code delete_limit}
 * @param updateLimit rows per update statement (nullify and update_column_to)
 * @param maxDeletesPerRun a run stops once it deleted this many rows; the batch is re-queued
 * @param maxUpdatesPerRun a run stops once it updated this many rows
 * @param sink the sink settings cleanup runs with: the top-level {@code sink:} with this section's
 *     {@code max-attempts}, {@code consume-after}, {@code max-runtime-per-run} and own {@code
 *     sink:} overrides
 */
public record LfkSettings(
    int batchSize,
    Duration maxWait,
    int deleteLimit,
    int updateLimit,
    long maxDeletesPerRun,
    long maxUpdatesPerRun,
    SinkSettings sink) {
  public static final int DEFAULT_BATCH_SIZE = 1_000;
  public static final Duration DEFAULT_MAX_WAIT = Duration.ofSeconds(1);
  public static final int DEFAULT_DELETE_LIMIT = 1_000;
  public static final int DEFAULT_UPDATE_LIMIT = 500;
  public static final int DEFAULT_MAX_DELETES_PER_RUN = 100_000;
  public static final int DEFAULT_MAX_UPDATES_PER_RUN = 50_000;
  public static final Duration DEFAULT_MAX_RUNTIME_PER_RUN = Duration.ofSeconds(30);
  public static final int DEFAULT_MAX_ATTEMPTS = 3;
  public static final Duration DEFAULT_CONSUME_AFTER = Duration.ofMinutes(10);
  static final int MAX_LIMIT = 1_000_000;

  /** The defaults on top of the given top-level sink settings. */
  public static LfkSettings defaults(SinkSettings base) {
    return new LfkSettings(
        DEFAULT_BATCH_SIZE,
        DEFAULT_MAX_WAIT,
        DEFAULT_DELETE_LIMIT,
        DEFAULT_UPDATE_LIMIT,
        DEFAULT_MAX_DELETES_PER_RUN,
        DEFAULT_MAX_UPDATES_PER_RUN,
        cleanupSink(
            base, DEFAULT_MAX_ATTEMPTS, DEFAULT_CONSUME_AFTER, DEFAULT_MAX_RUNTIME_PER_RUN));
  }

  /**
   * Reads the settings keys of the section; the caller reads the definitions and finishes it.
   *
   * @param base the top-level sink settings
   */
  static LfkSettings from(ConfigNode n, SinkSettings base) {
    int batchSize = n.integer("batch-size", DEFAULT_BATCH_SIZE, 1, MAX_LIMIT);
    Duration maxWait = n.positiveDuration("max-wait", DEFAULT_MAX_WAIT);
    int deleteLimit = n.integer("delete-limit", DEFAULT_DELETE_LIMIT, 1, MAX_LIMIT);
    int updateLimit = n.integer("update-limit", DEFAULT_UPDATE_LIMIT, 1, MAX_LIMIT);
    int maxDeletes =
        n.integer("max-deletes-per-run", DEFAULT_MAX_DELETES_PER_RUN, 1, Integer.MAX_VALUE);
    int maxUpdates =
        n.integer("max-updates-per-run", DEFAULT_MAX_UPDATES_PER_RUN, 1, Integer.MAX_VALUE);
    SinkSettings cleanup =
        cleanupSink(
            base,
            n.integer("max-attempts", DEFAULT_MAX_ATTEMPTS, 1, 1000),
            n.positiveDuration("consume-after", DEFAULT_CONSUME_AFTER),
            n.positiveDuration("max-runtime-per-run", DEFAULT_MAX_RUNTIME_PER_RUN));
    ConfigNode sinkSection = n.section("sink");
    for (String key : List.of("max-attempts", "consume-after", "max-runtime-per-run")) {
      if (n.has(key) && sinkSection.has(key)) {
        throw sinkSection.error(
            key, "is set in " + n.path() + " too; keep one (the two would disagree)");
      }
    }
    if (sinkSection.has("max-rows-per-run")) {
      // Taken, it would add a third row limit, deletes and updates counted together.
      throw sinkSection.error(
          "max-rows-per-run",
          "has no place in "
              + n.path()
              + ": a cleanup run's row limits are max-deletes-per-run and max-updates-per-run of "
              + n.path());
    }
    SinkSettings sink = SinkSection.from(sinkSection, cleanup);
    return new LfkSettings(
        batchSize, maxWait, deleteLimit, updateLimit, maxDeletes, maxUpdates, sink);
  }

  private static SinkSettings cleanupSink(
      SinkSettings base, int attempts, Duration consumeAfter, Duration maxRuntime) {
    // Row limits are cleanup's own (deletes and updates apart); the sink only bounds runtime.
    return base.withAttempts(attempts, consumeAfter).withLimits(Long.MAX_VALUE, maxRuntime);
  }

  /** The statement size for an action: the definition's delete_limit, else the default. */
  int statementLimit(LooseForeignKey key) {
    return key.deleteLimit().orElse(key.onDelete().updates() ? updateLimit : deleteLimit);
  }
}
