package dev.spillway.config;

import dev.spillway.event.TableName;
import dev.spillway.health.HealthMonitor;
import dev.spillway.sink.SinkSettings;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.Objects;
import java.util.Set;

/**
 * The whole configuration, built once from YAML (or defaults) and checked eagerly.
 *
 * @param source the file it was read from, or null when there was none
 * @param workingDir embedded broker and database data, state stores
 * @param databases empty: one embedded PostgreSQL database named {@code main}
 * @param tables table ({@code schema.table}) → database name; unlisted tables are in {@code main}
 * @param health sampling interval, hold and thresholds of the health monitor
 * @param sink how pipelines claim and run batches, unless a pipeline says otherwise
 */
public record SpillwayConfig(
    Path source,
    Path workingDir,
    HttpConfig http,
    KafkaConfig kafka,
    Map<String, DatabaseConfig> databases,
    Map<String, String> tables,
    CaptureConfig capture,
    HealthMonitor.Settings health,
    SinkSettings sink) {
  public static final String DEFAULT_WORKING_DIR = ".spillway";
  public static final String MAIN = "main";

  public SpillwayConfig {
    Objects.requireNonNull(workingDir, "workingDir");
    Objects.requireNonNull(http, "http");
    Objects.requireNonNull(kafka, "kafka");
    Objects.requireNonNull(capture, "capture");
    Objects.requireNonNull(health, "health");
    Objects.requireNonNull(sink, "sink");
    databases = java.util.Collections.unmodifiableMap(new LinkedHashMap<>(databases));
    tables = java.util.Collections.unmodifiableMap(new LinkedHashMap<>(tables));
  }

  /** Everything embedded, data under {@code baseDir/.spillway}. */
  public static SpillwayConfig defaults(Path baseDir) {
    return new SpillwayConfig(
        null,
        baseDir.resolve(DEFAULT_WORKING_DIR).normalize(),
        new HttpConfig(HttpConfig.DEFAULT_PORT),
        KafkaConfig.embeddedDefaults(),
        Map.of(),
        Map.of(),
        CaptureConfig.defaults(),
        HealthMonitor.Settings.defaults(),
        SinkSettings.defaults());
  }

  /** Builds the configuration from the root mapping; one line per section. */
  static SpillwayConfig from(ConfigNode root, Path source, Path baseDir) {
    Path workingDir = baseDir.resolve(root.string("working-dir", DEFAULT_WORKING_DIR)).normalize();
    HttpConfig http = HttpConfig.from(root.section("http"));
    KafkaConfig kafka = KafkaConfig.from(root.section("kafka"));
    Map<String, DatabaseConfig> databases = new LinkedHashMap<>();
    ConfigNode dbs = root.section("databases");
    for (String name : dbs.keys()) {
      if (!DatabaseConfig.NAME.matcher(name).matches()) {
        throw dbs.error(
            name, "is not a valid database name (use lower-case letters, digits and '_')");
      }
      ConfigNode node =
          dbs.child(name)
              .orElseThrow(() -> dbs.error(name, "must be a mapping with url and username"));
      databases.put(name, DatabaseConfig.from(name, node));
    }
    dbs.finish();
    Map<String, String> tables = new LinkedHashMap<>();
    ConfigNode tablesNode = root.section("tables");
    Set<String> known = databases.isEmpty() ? Set.of(MAIN) : databases.keySet();
    for (Map.Entry<String, String> e : root.stringMap("tables").entrySet()) {
      if (!known.contains(e.getValue())) {
        throw tablesNode.error(
            e.getKey(),
            "names database '"
                + e.getValue()
                + "', which is not configured (known: "
                + String.join(", ", known)
                + ")");
      }
      tables.put(TableName.parse(e.getKey()).toString(), e.getValue());
    }
    CaptureConfig capture = CaptureConfig.from(root.section("capture"));
    HealthMonitor.Settings health = HealthSection.from(root.section("health"));
    SinkSettings sink = SinkSection.from(root.section("sink"), SinkSettings.defaults());
    root.finish();
    return new SpillwayConfig(
        source, workingDir, http, kafka, databases, tables, capture, health, sink);
  }

  public boolean embeddedDatabases() {
    return databases.isEmpty();
  }

  /** The names of every database, just {@code main} when embedded. */
  public Set<String> databaseNames() {
    return embeddedDatabases() ? Set.of(MAIN) : new LinkedHashSet<>(databases.keySet());
  }

  /** The database holding a table ({@code table} or {@code schema.table}); unlisted → main. */
  public String databaseOf(String table) {
    return tables.getOrDefault(TableName.parse(table).toString(), MAIN);
  }

  /** The same settings with embedded Kafka and databases, as the quickstart and benchmarks use. */
  public SpillwayConfig embedded() {
    KafkaConfig k =
        new KafkaConfig(
            java.util.Optional.empty(),
            kafka.topicPrefix(),
            kafka.partitions(),
            KafkaConfig.DEFAULT_REPLICATION_FACTOR,
            Map.of());
    return new SpillwayConfig(
        source, workingDir, http, k, Map.of(), Map.of(), capture, health, sink);
  }

  public SpillwayConfig withWorkingDir(Path dir) {
    return new SpillwayConfig(source, dir, http, kafka, databases, tables, capture, health, sink);
  }

  public SpillwayConfig withHttpPort(int port) {
    return new SpillwayConfig(
        source, workingDir, new HttpConfig(port), kafka, databases, tables, capture, health, sink);
  }

  /** One line for the start-up log; passwords masked. */
  public String describe() {
    StringBuilder b = new StringBuilder();
    b.append("file=").append(source == null ? "(none)" : source);
    b.append(", working-dir=").append(workingDir);
    b.append(", http.port=").append(http.port());
    b.append(", kafka=").append(kafka.bootstrapServers().orElse("embedded"));
    b.append(", topic-prefix=").append(kafka.topicPrefix());
    b.append(", databases=").append(embeddedDatabases() ? "embedded main" : databases.values());
    if (!tables.isEmpty()) {
      b.append(", tables=").append(tables);
    }
    return b.toString();
  }
}
