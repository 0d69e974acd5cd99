package dev.spillway.lfk;

import dev.spillway.event.TableName;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;

/**
 * GitLab's loose-foreign-key metrics (labels {@code table} and {@code database}), and the same
 * counts per parent table for {@code lfk status}. In Prometheus text the counters carry the {@code
 * _total} suffix.
 */
public final class LfkMetrics {
  static final String PROCESSED = "loose_foreign_key_processed_deleted_records";
  static final String INCREMENTED = "loose_foreign_key_incremented_deleted_records";
  static final String RESCHEDULED = "loose_foreign_key_rescheduled_deleted_records";
  static final String DELETIONS = "loose_foreign_key_deletions";
  static final String UPDATES = "loose_foreign_key_updates";

  /** Counts of one parent table since this process started. */
  public record ParentCounts(long processed, long incremented, long rescheduled) {}

  private final MeterRegistry registry;
  static final String REINSERTED = "spillway_lfk_reinserted_parents";
  private final Counter malformed;
  private final Map<String, LongAdder[]> perParent = new ConcurrentHashMap<>();

  public LfkMetrics(MeterRegistry registry) {
    this.registry = registry;
    this.malformed =
        Counter.builder("spillway_lfk_malformed_records")
            .description("Captured deletes the batching stage could not read, sent to the DLQ")
            .register(registry);
  }

  /** One captured delete the batching stage sent to the dead letters. */
  void malformed() {
    malformed.increment();
  }

  /** Deleted parent rows whose children are all cleaned up. */
  void processed(String database, TableName parent, long n) {
    count(PROCESSED, "Deleted parent rows whose cleanup finished", database, parent, n);
    adders(database, parent)[0].add(n);
  }

  /** Deleted parent rows whose cleanup run ended unfinished, so their attempts went up. */
  void incremented(String database, TableName parent, long n) {
    count(INCREMENTED, "Deleted parent rows whose cleanup attempts grew", database, parent, n);
    adders(database, parent)[1].add(n);
  }

  /** Deleted parent rows delayed after too many unfinished runs. */
  void rescheduled(String database, TableName parent, long n) {
    count(RESCHEDULED, "Deleted parent rows delayed after repeated attempts", database, parent, n);
    adders(database, parent)[2].add(n);
  }

  /**
   * Deleted parent ids whose key the parent table held again when their batch ran, so their
   * children were left alone.
   */
  void reinserted(String database, TableName parent, long n) {
    count(REINSERTED, "Deleted parent ids the parent table holds again", database, parent, n);
  }

  void deletions(String database, TableName child, long n) {
    count(DELETIONS, "Child rows deleted", database, child, n);
  }

  void updates(String database, TableName child, long n) {
    count(UPDATES, "Child rows updated (nullified or set to a value)", database, child, n);
  }

  /** Per parent ({@code database/schema.table}) counts since start. */
  public Map<String, ParentCounts> snapshot() {
    Map<String, ParentCounts> out = new java.util.TreeMap<>();
    perParent.forEach((k, a) -> out.put(k, new ParentCounts(a[0].sum(), a[1].sum(), a[2].sum())));
    return out;
  }

  private LongAdder[] adders(String database, TableName parent) {
    return perParent.computeIfAbsent(
        database + "/" + parent,
        k -> new LongAdder[] {new LongAdder(), new LongAdder(), new LongAdder()});
  }

  private void count(String name, String help, String database, TableName table, long n) {
    if (n <= 0) {
      return;
    }
    Counter.builder(name)
        .description(help)
        .tag("table", table.toString())
        .tag("database", database)
        .register(registry)
        .increment(n);
  }
}
