package dev.spillway.capture;

import dev.spillway.event.TableName;
import java.util.Objects;

/**
 * One captured kind of change: which table of which database, which change, and the topic it goes
 * to. Pipelines contribute routes (loose-foreign-key parents: deletes; buffer tables: inserts).
 */
public record CaptureRoute(String database, TableName table, ChangeKind kind, String topic) {
  public CaptureRoute {
    Objects.requireNonNull(database, "database");
    Objects.requireNonNull(table, "table");
    Objects.requireNonNull(kind, "kind");
    Objects.requireNonNull(topic, "topic");
  }
}
