package dev.spillway.config;

import dev.spillway.capture.CaptureSettings;
import dev.spillway.event.TableName;
import dev.spillway.health.HealthMonitor;
import dev.spillway.sink.SinkSettings;
import dev.spillway.support.Directories;
import java.nio.file.Files;
import java.nio.file.InvalidPathException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.StringJoiner;
import java.util.stream.Collectors;

/**
 * The whole configuration, built once from YAML (or defaults) and checked eagerly: once a {@code
 * SpillwayConfig} exists, every value in it is valid. Immutable.
 *
 * <p>Each top-level section is a record (or settings class) with {@code DEFAULT_*} constants and a
 * {@code static from(ConfigNode)}. Adding a section means a component here, its key in {@link
 * #SECTIONS}, one line in {@link #from}, and passing the component on in {@link #embedded()} and
 * the {@code with…} methods.
 *
 * @param source the file it was read from, or null when there was none
 * @param workingDir absolute; embedded broker and database data, state stores
 * @param databases in file order; empty: one embedded PostgreSQL database named {@code main}
 * @param tables table ({@code schema.table}) → database name; unlisted tables are in {@code main}
 * @param health sampling interval, hold and thresholds of the health monitor
 * @param sink how pipelines claim and run batches, unless a pipeline says otherwise
 * @param pipelineSections the pipelines' own top-level sections ({@link #PIPELINE_SECTIONS}) as
 *     written, read by each pipeline with {@link #pipelineSection}
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
    SinkSettings sink,
    Map<String, ConfigNode> pipelineSections) {
  public static final String DEFAULT_WORKING_DIR = ".spillway";

  /** The top-level keys this record's own components are read from. */
  static final List<String> SECTIONS =
      List.of("working-dir", "http", "kafka", "databases", "tables", "capture", "health", "sink");

  /**
   * Top-level sections that belong to pipelines. The configuration keeps them as written, so it
   * knows nothing of pipeline code; each pipeline reads and checks its own section at start-up.
   */
  public static final java.util.List<String> PIPELINE_SECTIONS =
      java.util.List.of("loose-foreign-keys", "buffers");

  /**
   * Sections of pipelines this version does not run: refused, so that a configuration written for
   * them does not start and do nothing.
   */
  private static final java.util.List<String> LATER_SECTIONS =
      java.util.List.of("operations", "migrations", "scheduler");

  /** The database that holds every table not listed under {@code tables:}. */
  public static final String MAIN = "main";

  public SpillwayConfig {
    Objects.requireNonNull(workingDir, "workingDir");
    Objects.requireNonNull(http, "http");
    Objects.requireNonNull(kafka, "kafka");
    Objects.requireNonNull(capture, "capture");
    Objects.requireNonNull(health, "health");
    Objects.requireNonNull(sink, "sink");
    databases = Collections.unmodifiableMap(new LinkedHashMap<>(databases));
    tables = Collections.unmodifiableMap(new LinkedHashMap<>(tables));
    pipelineSections = Map.copyOf(pipelineSections);
  }

  /** Everything embedded, data under {@code .spillway} in the current directory. */
  public static SpillwayConfig defaults() {
    return defaults(Path.of(""));
  }

  /** Everything embedded, data under {@code baseDir/.spillway}. */
  public static SpillwayConfig defaults(Path baseDir) {
    // The same path as an empty file, so the two can never disagree.
    return from(ConfigNode.root("(defaults)", null, name -> null), null, baseDir);
  }

  /**
   * Builds the configuration from the root mapping, one line per section, then rejects any
   * top-level key no section read.
   *
   * @param source the file, or null
   * @param baseDir a relative working-dir resolves against it
   */
  static SpillwayConfig from(ConfigNode root, Path source, Path baseDir) {
    for (String key : LATER_SECTIONS) {
      if (root.keys().contains(key)) { // even empty: its pipeline would not run
        throw root.error(
            key,
            "is a pipeline this version of Spillway does not run yet; it runs "
                + String.join(" and ", PIPELINE_SECTIONS));
      }
    }
    // A misspelt section is named before a check its absence would fail (tables: naming a database
    // that databases: spelt wrong did not give).
    List<String> sections = new ArrayList<>(SECTIONS);
    sections.addAll(PIPELINE_SECTIONS);
    root.only(sections.toArray(String[]::new));
    Path workingDir = workingDir(root, baseDir);
    HttpConfig http = HttpConfig.from(root.section("http"));
    ConfigNode kafkaNode = root.section("kafka");
    KafkaConfig kafka = KafkaConfig.from(kafkaNode);
    Map<String, ConfigNode> databaseNodes = root.children("databases");
    Map<String, DatabaseConfig> databases = DatabaseConfig.allFrom(databaseNodes);
    slotNames(kafkaNode, kafka.topicPrefix(), databaseNodes);
    embeddedPathProblem(workingDir, kafka.embedded(), databases.isEmpty())
        .ifPresent(
            problem -> {
              throw root.error("working-dir", problem);
            });
    Map<String, String> tables = tables(root, namesOf(databases));
    CaptureConfig capture = CaptureConfig.from(root.section("capture"));
    HealthMonitor.Settings health = HealthSection.from(root.section("health"));
    SinkSettings sink = SinkSection.from(root.section("sink"), SinkSettings.defaults());
    Map<String, ConfigNode> pipelineSections = new HashMap<>();
    for (String key : PIPELINE_SECTIONS) {
      pipelineSections.put(key, root.section(key));
    }
    root.finish();
    return new SpillwayConfig(
        source,
        workingDir,
        http,
        kafka,
        databases,
        tables,
        capture,
        health,
        sink,
        pipelineSections);
  }

  /** What the embedded broker cannot take in its path: it reads a ',' as two directories. */
  private static final String UNUSABLE_BY_EMBEDDED_KAFKA = ",";

  /**
   * What the embedded PostgreSQL cannot take in its path: its start goes through a shell line that
   * quotes paths in double quotes.
   */
  private static final String UNUSABLE_BY_EMBEDDED_POSTGRES = "\"$`\\";

  /**
   * Why the embedded parts named cannot run in {@code dir}, a sentence after the key; empty when
   * they can.
   */
  private static Optional<String> embeddedPathProblem(Path dir, boolean kafka, boolean postgres) {
    String unusable =
        (kafka ? UNUSABLE_BY_EMBEDDED_KAFKA : "") + (postgres ? UNUSABLE_BY_EMBEDDED_POSTGRES : "");
    for (char c : unusable.toCharArray()) {
      if (dir.toString().indexOf(c) >= 0) {
        return Optional.of(
            "names "
                + dir
                + ", whose '"
                + c
                + "' the embedded "
                + (UNUSABLE_BY_EMBEDDED_KAFKA.indexOf(c) >= 0 ? "Kafka broker" : "PostgreSQL")
                + " cannot take in a path; set working-dir to a path without one");
      }
    }
    return Optional.empty();
  }

  private static Path workingDir(ConfigNode root, Path baseDir) {
    if (root.keys().contains("working-dir") && !root.has("working-dir")) {
      throw root.error(
          "working-dir",
          "has no value (YAML reads a bare ~ or null as none); write the full path, such as"
              + " ${env:HOME}/spillway, or leave the key out for "
              + DEFAULT_WORKING_DIR
              + " beside the file");
    }
    String dir = root.string("working-dir", DEFAULT_WORKING_DIR);
    if (dir.isBlank()) {
      throw root.error("working-dir", "must not be empty");
    }
    if (dir.equals("~") || dir.startsWith("~/")) {
      // Only a shell expands it: the directory would be one named '~' beside the file.
      Path made = baseDir.toAbsolutePath().resolve("~");
      throw root.error(
          "working-dir",
          "starts with ~, which only a shell expands; write the full path, or ${env:HOME}"
              + dir.substring(1)
              + (Files.isDirectory(made)
                  ? " (an earlier version made "
                      + made
                      + " for it, which holds its state: write ./"
                      + dir
                      + " to go on with it)"
                  : ""));
    }
    Path resolved;
    try {
      resolved = baseDir.toAbsolutePath().resolve(dir).normalize();
    } catch (InvalidPathException e) {
      throw root.error("working-dir", "is not a valid path (" + e.getReason() + ")");
    }
    // What exists of it must be directories: a start would fail making it, after reading this.
    Optional<Path> file = Directories.fileInTheWay(resolved);
    if (file.isPresent()) {
      throw root.error("working-dir", Directories.problem(resolved, file.get()));
    }
    return resolved;
  }

  /**
   * Refuses a topic prefix and database name whose replication slot PostgreSQL would not take, now
   * rather than when capture starts, after topics and consumer groups were made. The prefix is
   * named when the file sets it (an embedded database's name is Spillway's), else the database.
   */
  private static void slotNames(
      ConfigNode kafka, String topicPrefix, Map<String, ConfigNode> databases) {
    Set<String> names = databases.isEmpty() ? Set.of(MAIN) : databases.keySet();
    for (String database : names) {
      Optional<String> overlong = CaptureSettings.overlongSlotName(topicPrefix, database);
      if (overlong.isPresent()) {
        String problem = overlong.get();
        throw kafka.has("topic-prefix") || !databases.containsKey(database)
            ? kafka.error("topic-prefix", problem)
            : databases.get(database).invalid(problem);
      }
    }
  }

  /** {@code tables:}: keys normalized to {@code schema.table}, values checked against databases. */
  private static Map<String, String> tables(ConfigNode root, Set<String> known) {
    Map<String, String> written = root.stringMap("tables");
    if (written.isEmpty()) {
      return Map.of();
    }
    ConfigNode node = root.section("tables");
    Map<String, String> out = new LinkedHashMap<>();
    Map<String, String> firstSpelling = new HashMap<>();
    for (Map.Entry<String, String> e : written.entrySet()) {
      String key = e.getKey();
      // Quoting rules are PostgreSQL's business, dots, blanks and lengths are ours.
      java.util.Optional<String> unwritable = TableName.unwritable(key);
      if (unwritable.isPresent()) {
        throw node.error(key, unwritable.get());
      }
      if (!known.contains(e.getValue())) {
        throw node.error(
            key,
            "names database '"
                + e.getValue()
                + "', which is not configured (known: "
                + String.join(", ", known)
                + ")");
      }
      String table = TableName.parse(key).toString();
      String first = firstSpelling.putIfAbsent(table, key);
      if (first != null) {
        throw node.error(key, "is the same table as " + first);
      }
      out.put(table, e.getValue());
    }
    return out;
  }

  private static Set<String> namesOf(Map<String, DatabaseConfig> databases) {
    return databases.isEmpty() ? Set.of(MAIN) : databases.keySet();
  }

  /**
   * A pipeline's section, unread, for the pipeline to read and {@link ConfigNode#finish()}; an
   * empty mapping when the file has none. Errors still name the file and line.
   *
   * @param key one of {@link #PIPELINE_SECTIONS}
   */
  public ConfigNode pipelineSection(String key) {
    ConfigNode n = pipelineSections.get(key);
    if (n == null) {
      throw new IllegalArgumentException("Not a pipeline section: " + key);
    }
    return n.fresh();
  }

  /** The file it was read from as a problem's sentence names it, or {@code (defaults)}. */
  public String sourceName() {
    return source == null ? "(defaults)" : source.toString();
  }

  /** Whether Spillway runs its own PostgreSQL with the one database {@code main}. */
  public boolean embeddedDatabases() {
    return databases.isEmpty();
  }

  /** The names of every database in file order, just {@code main} when embedded. */
  public Set<String> databaseNames() {
    return namesOf(databases);
  }

  /**
   * The database holding a table.
   *
   * @param table {@code table} (meaning {@code public.table}) or {@code schema.table}
   * @return its database from {@code tables:}, or {@code main} when unlisted
   */
  public String databaseOf(String table) {
    return tables.getOrDefault(TableName.parse(table).toString(), MAIN);
  }

  /**
   * The same settings with embedded Kafka and databases, as the quickstart and benchmarks use.
   *
   * @throws ConfigException when they cannot run in the working directory
   */
  public SpillwayConfig embedded() {
    embeddedPathProblem(workingDir, true, true)
        .ifPresent(
            problem -> {
              throw new ConfigException(sourceName(), null, "working-dir", problem);
            });
    KafkaConfig k =
        new KafkaConfig(
            Optional.empty(),
            kafka.topicPrefix(),
            kafka.partitions(),
            KafkaConfig.DEFAULT_REPLICATION_FACTOR,
            Map.of());
    return new SpillwayConfig(
        source, workingDir, http, k, Map.of(), Map.of(), capture, health, sink, pipelineSections);
  }

  public SpillwayConfig withWorkingDir(Path dir) {
    return new SpillwayConfig(
        source, dir, http, kafka, databases, tables, capture, health, sink, pipelineSections);
  }

  public SpillwayConfig withHttpPort(int port) {
    return new SpillwayConfig(
        source,
        workingDir,
        new HttpConfig(port),
        kafka,
        databases,
        tables,
        capture,
        health,
        sink,
        pipelineSections);
  }

  /**
   * A short summary for the start-up log, one section per line after the first; passwords are
   * masked and Kafka properties show only their names, since they often carry credentials.
   */
  public String describe() {
    String nl = System.lineSeparator() + "  ";
    StringBuilder b = new StringBuilder();
    b.append(source == null ? "no config file" : "file " + source)
        .append(", working-dir ")
        .append(workingDir)
        .append(", http port ")
        .append(http.port() == 0 ? "any free" : String.valueOf(http.port()));
    b.append(nl)
        .append("kafka: ")
        .append(kafka.bootstrapServers().orElse("embedded"))
        .append(", topic-prefix ")
        .append(kafka.topicPrefix())
        .append(", partitions ")
        .append(kafka.partitions())
        .append(", replication-factor ")
        .append(kafka.replicationFactor());
    if (!kafka.properties().isEmpty()) {
      b.append(", properties ").append(String.join(", ", kafka.properties().keySet()));
    }
    b.append(nl).append("databases: ");
    if (embeddedDatabases()) {
      b.append("embedded ").append(MAIN);
    } else {
      StringJoiner dbs = new StringJoiner("; ");
      databases.values().forEach(d -> dbs.add(d.toString()));
      b.append(dbs);
    }
    if (!tables.isEmpty()) {
      b.append(nl)
          .append("tables: ")
          .append(
              tables.entrySet().stream()
                  .map(e -> e.getKey() + " in " + e.getValue())
                  .collect(Collectors.joining(", ")));
    }
    b.append(nl)
        .append("capture: poll-interval ")
        .append(DurationText.format(capture.pollInterval()))
        .append(", heartbeat-interval ")
        .append(DurationText.format(capture.heartbeatInterval()))
        .append(", max-batch-size ")
        .append(capture.maxBatchSize())
        .append(", offset-flush-interval ")
        .append(DurationText.format(capture.offsetFlushInterval()));
    b.append(nl)
        .append("health: interval ")
        .append(DurationText.format(health.interval()))
        .append(", hold ")
        .append(DurationText.format(health.hold()));
    b.append(nl)
        .append("sink: consumers ")
        .append(sink.consumers())
        .append(", max-in-flight ")
        .append(sink.maxInFlight())
        .append(", max-attempts ")
        .append(sink.maxAttempts())
        .append(", max-rows-per-run ")
        .append(sink.maxRowsPerRun())
        .append(", max-runtime-per-run ")
        .append(DurationText.format(sink.maxRuntimePerRun()));
    return b.toString();
  }
}
