package dev.spillway.capture;

import dev.spillway.event.TableName;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.MeterRegistry;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;

/** Changes published per database, table and kind since start. Thread-safe. */
public final class CaptureStats {
  private final Map<Key, LongAdder> counts = new ConcurrentHashMap<>();
  private final MeterRegistry registry;

  /** One row of {@link #snapshot()}. */
  public record Count(String database, TableName table, ChangeKind kind, long changes) {}

  private record Key(String database, TableName table, ChangeKind kind) {}

  public CaptureStats(MeterRegistry registry) {
    this.registry = registry;
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
