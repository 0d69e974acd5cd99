package dev.spillway.capture;

import dev.spillway.event.TableName;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.atomic.LongAdder;

/** Changes published per database, table and kind since start. Thread-safe. */
public final class CaptureStats {
  private final Map<Key, LongAdder> counts = new ConcurrentHashMap<>();
  private final Map<Key, LongAdder> tooLarge = new ConcurrentHashMap<>();
  private final Map<SlotKey, SlotWal> slots = new ConcurrentHashMap<>();
  private final Map<String, HandOver> handOvers = new ConcurrentHashMap<>();
  private final Map<String, AtomicInteger> streaming = new ConcurrentHashMap<>();
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
   * How long the batch of changes capture has in hand for a database has waited for Kafka to take
   * it, and what Kafka last answered. A batch is in hand for milliseconds while Kafka takes it; one
   * Kafka does not take is sent again until it does, the slot keeping its changes meanwhile.
   */
  public static final class HandOver {
    private final String database;
    private final Clock clock;
    private final AtomicReference<Wait> wait = new AtomicReference<>();

    HandOver(String database, Clock clock) {
      this.database = database;
      this.clock = clock;
    }

    String database() {
      return database;
    }

    /** A batch is handed to Kafka. */
    void sending() {
      wait.set(new Wait(database, clock.instant(), null));
    }

    /** Kafka did not take it, for this reason: it is sent again. */
    void refused(String why) {
      wait.updateAndGet(w -> new Wait(database, w == null ? clock.instant() : w.since(), why));
    }

    /** Kafka took it, or capture stopped sending it. */
    void ended() {
      wait.set(null);
    }

    Wait current() {
      return wait.get();
    }

    double waitingSeconds() {
      Wait w = wait.get();
      return w == null
          ? 0
          : Math.max(0, Duration.between(w.since(), clock.instant()).toMillis()) / 1000.0;
    }
  }

  /**
   * A batch of a database's changes waiting for Kafka since {@code since}.
   *
   * @param reason what Kafka last answered, or null when it has not answered yet
   */
  public record Wait(String database, Instant since, String reason) {}

  /** The hand-over of a database's changes, its gauge registered with the first capture of it. */
  HandOver handOver(String database, Clock clock) {
    return handOvers.computeIfAbsent(
        database,
        db -> {
          HandOver h = new HandOver(db, clock);
          if (registry != null) {
            Gauge.builder("spillway_capture_kafka_wait_seconds", h, HandOver::waitingSeconds)
                .description(
                    "How long the batch of the database's changes in hand has waited for Kafka to"
                        + " take it; 0 when none waits")
                .tag("database", db)
                .strongReference(true)
                .register(registry);
          }
          return h;
        });
  }

  /** The database's batch in hand, when it has waited for Kafka for {@code atLeast} or more. */
  public Optional<Wait> wait(String database, Duration atLeast) {
    HandOver h = handOvers.get(database);
    Wait w = h == null ? null : h.current();
    if (w == null || w.since().isAfter(h.clock.instant().minus(atLeast))) {
      return Optional.empty();
    }
    return Optional.of(w);
  }

  /**
   * Whether the database's slot streams to this process (1) or this one stands by while it streams
   * to another instance (0).
   */
  void standingBy(String database, boolean standingBy) {
    streaming
        .computeIfAbsent(
            database,
            db -> {
              AtomicInteger v = new AtomicInteger();
              if (registry != null) {
                Gauge.builder("spillway_capture_streaming", v, AtomicInteger::get)
                    .description(
                        "1 while the database's slot streams to this process, 0 while it stands by"
                            + " for another instance")
                    .tag("database", db)
                    .register(registry);
              }
              return v;
            })
        .set(standingBy ? 0 : 1);
  }

  /** Registers a route so it shows with zero before its first change. */
  void register(CaptureRoute r) {
    adder(new Key(r.database(), r.table(), r.kind()));
  }

  void published(CaptureRoute r) {
    adder(new Key(r.database(), r.table(), r.kind())).increment();
  }

  /** A captured row too large for one Kafka record, dead-lettered in its place (key alone). */
  void tooLarge(CaptureRoute r) {
    tooLarge
        .computeIfAbsent(
            new Key(r.database(), r.table(), r.kind()),
            k -> {
              LongAdder adder = new LongAdder();
              if (registry != null) {
                FunctionCounter.builder(
                        "spillway_capture_rows_too_large", adder, LongAdder::doubleValue)
                    .description(
                        "Captured rows too large for one Kafka record, their keys dead-lettered")
                    .tag("database", k.database())
                    .tag("table", k.table().toString())
                    .register(registry);
              }
              return adder;
            })
        .increment();
  }

  /** Inserted rows of {@code table} too large for one Kafka record since start. */
  public long tooLargeInserts(String database, TableName table) {
    LongAdder adder = tooLarge.get(new Key(database, table, ChangeKind.INSERT));
    return adder == null ? 0 : adder.sum();
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
                .tag("operation", k.kind().name().toLowerCase(Locale.ROOT))
                .register(registry);
          }
          return adder;
        });
  }
}
