package dev.spillway.lfk;

import dev.spillway.capture.CaptureSettings;
import dev.spillway.config.ConfigLoader;
import dev.spillway.config.SpillwayConfig;
import dev.spillway.event.TableName;
import dev.spillway.jdbc.DatabaseEndpoint;
import dev.spillway.runtime.SpillwayRuntime;
import dev.spillway.testing.Infra;
import dev.spillway.testing.TestSql;
import java.nio.file.Path;
import java.time.Clock;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.Set;
import javax.sql.DataSource;

/**
 * A whole Spillway runtime on the shared test Kafka and PostgreSQL, running only the
 * loose-foreign-key pipeline, isolated by its topic prefix (and so its slots and topics).
 */
final class LfkHarness implements AutoCloseable {
  final SpillwayRuntime runtime;
  final LfkPipeline pipeline;
  private final List<String> slots = new ArrayList<>();

  /**
   * @param databases Spillway database name → physical database on the test server
   * @param tables table → Spillway database name, for {@code tables:}
   */
  LfkHarness(
      Infra infra,
      Path dir,
      String prefix,
      Map<String, String> databases,
      Map<String, String> tables,
      LfkSettings settings,
      List<CheckedKey> keys)
      throws Exception {
    this(infra, dir, prefix, databases, tables, settings, keys, null);
  }

  /**
   * @param lockTimeout every database's {@code lock-timeout}, or null for the default
   */
  LfkHarness(
      Infra infra,
      Path dir,
      String prefix,
      Map<String, String> databases,
      Map<String, String> tables,
      LfkSettings settings,
      List<CheckedKey> keys,
      String lockTimeout)
      throws Exception {
    StringBuilder yaml = new StringBuilder();
    yaml.append("working-dir: ").append(dir.resolve("work")).append('\n');
    yaml.append("http:\n  port: 0\n");
    yaml.append("kafka:\n  bootstrap-servers: ")
        .append(infra.bootstrapServers())
        .append("\n  topic-prefix: ")
        .append(prefix)
        .append('\n');
    // A byte of replay lag would throttle: capture's own walsender must not count as a standby.
    yaml.append(
        "health:\n  interval: 200ms\n  hold: 200ms\n  replication-lag-bytes-throttle: 1B\n");
    yaml.append("databases:\n");
    databases.forEach(
        (name, physical) -> {
          DatabaseEndpoint e = infra.database(physical);
          yaml.append("  ")
              .append(name)
              .append(":\n    url: ")
              .append(e.url())
              .append("\n    username: ")
              .append(e.username())
              .append('\n');
          if (lockTimeout != null) {
            yaml.append("    lock-timeout: ").append(lockTimeout).append('\n');
          }
        });
    if (!tables.isEmpty()) {
      yaml.append("tables:\n");
      tables.forEach((t, db) -> yaml.append("  ").append(t).append(": ").append(db).append('\n'));
    }
    SpillwayConfig config = ConfigLoader.parse(yaml.toString(), "test.yml", null, dir, n -> null);
    runtime = SpillwayRuntime.start(config, Set.of(), Clock.systemUTC());
    try {
      pipeline = LfkPipeline.start(runtime, settings, keys);
      runtime.startCapture(pipeline.routes(runtime.topics()));
    } catch (Exception e) {
      runtime.close();
      throw e;
    }
    databases.keySet().forEach(db -> slots.add(runtime.captureSettings().slotName(db)));
  }

  DataSource db(String name) {
    return runtime.databases().dataSource(name);
  }

  long count(String db, String query) {
    return TestSql.count(db(db), query);
  }

  @Override
  public void close() {
    runtime.close();
  }

  /** Drops this harness's slots; call after {@link #close()} with fresh pools. */
  static void dropSlots(Infra infra, Map<String, String> databases, String prefix) {
    databases.forEach(
        (name, physical) -> {
          try (var dbs = infra.databases(physical)) {
            TestSql.dropCapture(dbs.dataSource(physical), CaptureSettings.slotName(prefix, name));
          }
        });
  }

  static CheckedKey key(
      String child,
      String column,
      String parent,
      OnDelete onDelete,
      String childDb,
      String parentDb,
      String columnType) {
    return key(
        child, column, parent, onDelete, childDb, parentDb, columnType, null, null, List.of());
  }

  static CheckedKey key(
      String child,
      String column,
      String parent,
      OnDelete onDelete,
      String childDb,
      String parentDb,
      String columnType,
      String targetColumn,
      Object targetValue,
      List<LooseForeignKey.Condition> conditions) {
    LooseForeignKey k =
        new LooseForeignKey(
            TableName.parse(child),
            TableName.parse(parent),
            column,
            onDelete,
            Optional.ofNullable(targetColumn),
            targetValue,
            conditions,
            OptionalInt.empty(),
            "test");
    return new CheckedKey(
        k, childDb, parentDb, List.of("id"), columnType, "id", columnType, Optional.empty());
  }
}
