package dev.spillway.capture;

import dev.spillway.event.TableName;
import java.util.ArrayList;
import java.util.Collection;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/** All routes, grouped by database: what each database's capture publishes and where it goes. */
public final class CapturePlan {
  private final Map<String, Map<RouteKey, CaptureRoute>> byDatabase = new LinkedHashMap<>();

  private record RouteKey(TableName table, ChangeKind kind) {}

  public CapturePlan(Collection<CaptureRoute> routes) {
    for (CaptureRoute r : routes) {
      CaptureRoute previous =
          byDatabase
              .computeIfAbsent(r.database(), d -> new LinkedHashMap<>())
              .putIfAbsent(new RouteKey(r.table(), r.kind()), r);
      if (previous != null && !previous.topic().equals(r.topic())) {
        throw new IllegalArgumentException(
            r.kind() + " of " + r.table() + " in " + r.database() + " is routed twice");
      }
    }
  }

  public Set<String> databases() {
    return byDatabase.keySet();
  }

  /** The tables to publish from one database, in the order routes were given. */
  public Set<TableName> tables(String database) {
    Set<TableName> tables = new LinkedHashSet<>();
    byDatabase.getOrDefault(database, Map.of()).keySet().forEach(k -> tables.add(k.table()));
    return tables;
  }

  /** The tables of one database whose changes of {@code kind} are captured, in route order. */
  public Set<TableName> tables(String database, ChangeKind kind) {
    Set<TableName> tables = new LinkedHashSet<>();
    byDatabase
        .getOrDefault(database, Map.of())
        .keySet()
        .forEach(
            k -> {
              if (k.kind() == kind) {
                tables.add(k.table());
              }
            });
    return tables;
  }

  /** The kinds of change captured from one database, in declaration order. */
  public Set<ChangeKind> kinds(String database) {
    Set<ChangeKind> kinds = EnumSet.noneOf(ChangeKind.class);
    byDatabase.getOrDefault(database, Map.of()).keySet().forEach(k -> kinds.add(k.kind()));
    return kinds;
  }

  public List<CaptureRoute> routes(String database) {
    return new ArrayList<>(byDatabase.getOrDefault(database, Map.of()).values());
  }

  public Optional<CaptureRoute> route(String database, TableName table, ChangeKind kind) {
    return Optional.ofNullable(
        byDatabase.getOrDefault(database, Map.of()).get(new RouteKey(table, kind)));
  }

  public boolean isEmpty() {
    return byDatabase.isEmpty();
  }
}
