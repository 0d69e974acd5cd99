package dev.spillway.capture;

import dev.spillway.event.TableName;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;

/** Changes published per database, table and kind since start. Thread-safe. */
public final class CaptureStats {
  private final Map<Key, LongAdder> counts = new ConcurrentHashMap<>();
  private final Map<SlotKey, SlotWal> slots = new ConcurrentHashMap<>();
  private final Map<String, HandOver> handOvers = new ConcurrentHashMap<>();
  private final MeterRegistry registry;

  /** One row of {@link #snapshot()}. */
  public record Count(String database, TableName table, ChangeKind kind, long changes) {}

  private record Key(String database, TableName table, ChangeKind kind) {}

  private record SlotKey(String database, String slot) {}

  public CaptureStats(MeterRegistry registry) {
    this.registry = registry;
  }

  /**
   * What a slot keeps, as last read by capture's slot check (every 5 s): the bytes of WAL it holds,
   * and the bytes more it may hold before the server invalidates it (NaN without a limit). Both are
   * NaN while they cannot be read (or only from a standby), and 0 once the slot is lost.
   */
  public static final class SlotWal {
    private volatile double heldBytes = Double.NaN;
    private volatile double safeBytes = Double.NaN;

    void set(Long held, Long safe) {
      heldBytes = held == null ? Double.NaN : held;
      safeBytes = safe == null ? Double.NaN : Math.max(0, safe);
    }

    double heldBytes() {
      return heldBytes;
    }

    double safeBytes() {
      return safeBytes;
    }
  }

  /** The gauges of a database's slot, registered with the first capture of it. */
  SlotWal slot(String database, String slot) {
    return slots.computeIfAbsent(new SlotKey(database, slot), k -> register(database, slot));
  }

  private SlotWal register(String database, String slot) {
    SlotWal wal = new SlotWal();
    if (registry != null) {
      Gauge.builder("spillway_capture_slot_wal_held_bytes", wal, SlotWal::heldBytes)
          .description("WAL the replication slot keeps from being recycled, as last checked")
          .tag("database", database)
          .tag("slot", slot)
          .strongReference(true)
          .register(registry);
      Gauge.builder("spillway_capture_slot_safe_wal_bytes", wal, SlotWal::safeBytes)
          .description(
              "WAL that may still be written before the server invalidates the slot"
                  + " (max_slot_wal_keep_size); NaN without a limit")
          .tag("database", database)
          .tag("slot", slot)
          .strongReference(true)
          .register(registry);
    }
    return wal;
  }

  /**
   * Whether a database's captured changes reach Kafka: since when, and why, Kafka has not taken
   * them, while it does not. Capture keeps sending them again meanwhile, and the slot keeps them.
   */
  public static final class HandOver {
    private final String database;
    private volatile Instant refusedSince;
    private volatile String reason;

    HandOver(String database) {
      this.database = database;
    }

    String database() {
      return database;
    }

    void refused(Instant at, String why) {
      if (refusedSince == null) {
        refusedSince = at;
      }
      reason = why;
    }

    void taken() {
      refusedSince = null;
      reason = null;
    }

    double refusedSeconds() {
      Instant since = refusedSince;
      return since == null ? 0 : Duration.between(since, Instant.now()).toMillis() / 1000.0;
    }
  }

  /** One database whose changes Kafka has not taken since {@code since}. */
  public record Refusal(String database, Instant since, String reason) {}

  /** The hand-over state of a database, its gauge registered with the first capture of it. */
  HandOver handOver(String database) {
    return handOvers.computeIfAbsent(
        database,
        db -> {
          HandOver h = new HandOver(db);
          if (registry != null) {
            Gauge.builder("spillway_capture_kafka_refused_seconds", h, HandOver::refusedSeconds)
                .description(
                    "How long Kafka has not taken the database's captured changes; 0 while it does")
                .tag("database", db)
                .strongReference(true)
                .register(registry);
          }
          return h;
        });
  }

  /** The databases whose changes Kafka does not take now, by name. */
  public List<Refusal> refusals() {
    List<Refusal> out = new ArrayList<>();
    handOvers.values().stream()
        .sorted(Comparator.comparing(HandOver::database))
        .forEach(
            h -> {
              Instant since = h.refusedSince;
              String why = h.reason;
              if (since != null) {
                out.add(new Refusal(h.database, since, why));
              }
            });
    return out;
  }

  /** Registers a route so it shows with zero before its first change. */
  void register(CaptureRoute r) {
    adder(new Key(r.database(), r.table(), r.kind()));
  }

  void published(CaptureRoute r) {
    adder(new Key(r.database(), r.table(), r.kind())).increment();
  }

  public List<Count> snapshot() {
    List<Count> out = new ArrayList<>();
    counts.forEach((k, v) -> out.add(new Count(k.database(), k.table(), k.kind(), v.sum())));
    out.sort(
        (a, b) ->
            (a.database() + a.table() + a.kind()).compareTo(b.database() + b.table() + b.kind()));
    return out;
  }

  private LongAdder adder(Key key) {
    return counts.computeIfAbsent(
        key,
        k -> {
          LongAdder adder = new LongAdder();
          if (registry != null) {
            FunctionCounter.builder("spillway_capture_changes", adder, LongAdder::doubleValue)
                .description("Changes captured and acknowledged by Kafka")
                .tag("database", k.database())
                .tag("table", k.table().toString())
                .tag("operation", k.kind().name().toLowerCase())
                .register(registry);
          }
          return adder;
        });
  }
}
