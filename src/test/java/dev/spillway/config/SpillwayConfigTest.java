package dev.spillway.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.function.Function;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** What the rest of Spillway reads from a built configuration. */
class SpillwayConfigTest {
  private static final Duration LOCK = DatabaseConfig.DEFAULT_LOCK_TIMEOUT;

  private static final Path BASE = Path.of("/srv/app");
  private static final Function<String, String> NO_ENV = name -> null;

  private static SpillwayConfig parse(String yaml) {
    return ConfigLoader.parse(yaml, "spillway.yml", BASE, NO_ENV);
  }

  private static String error(String yaml) {
    try {
      parse(yaml);
    } catch (ConfigException e) {
      return e.getMessage();
    }
    throw new AssertionError("expected a configuration error for:\n" + yaml);
  }

  @Test
  void should_embed_everything_by_default_under_the_current_directory() {
    SpillwayConfig c = SpillwayConfig.defaults();
    assertThat(c.source()).isNull();
    assertThat(c.workingDir()).isEqualTo(Path.of("").toAbsolutePath().resolve(".spillway"));
    assertThat(c.http()).isEqualTo(new HttpConfig(HttpConfig.DEFAULT_PORT));
    assertThat(c.kafka()).isEqualTo(KafkaConfig.embeddedDefaults());
    assertThat(c.kafka().embedded()).isTrue();
    assertThat(c.embeddedDatabases()).isTrue();
    assertThat(c.databaseNames()).containsExactly(SpillwayConfig.MAIN);
    assertThat(c.tables()).isEmpty();
    assertThat(c.capture()).isEqualTo(CaptureConfig.defaults());
    assertThat(c.capture().heartbeatInterval()).isEqualTo(Duration.ofSeconds(10));
    assertThat(c.capture().maxBatchSize()).isEqualTo(2048);
    assertThat(c.capture().offsetFlushInterval()).isEqualTo(Duration.ofSeconds(1));
  }

  @Test
  void should_give_an_empty_file_a_null_document_and_comments_the_same_defaults() {
    SpillwayConfig defaults = SpillwayConfig.defaults(BASE);
    assertThat(parse(""))
        .usingRecursiveComparison()
        .ignoringFields("pipelineSections")
        .isEqualTo(defaults);
    assertThat(parse("~\n"))
        .usingRecursiveComparison()
        .ignoringFields("pipelineSections")
        .isEqualTo(defaults);
    assertThat(parse("# nothing configured yet\n\n"))
        .usingRecursiveComparison()
        .ignoringFields("pipelineSections")
        .isEqualTo(defaults);
    assertThat(parse("---\n"))
        .usingRecursiveComparison()
        .ignoringFields("pipelineSections")
        .isEqualTo(defaults);
  }

  @Test
  void should_resolve_a_relative_working_dir_against_the_base_directory() {
    assertThat(parse("working-dir: state\n").workingDir()).isEqualTo(BASE.resolve("state"));
    assertThat(parse("working-dir: ../state\n").workingDir()).isEqualTo(Path.of("/srv/state"));
    assertThat(parse("working-dir: /var/lib/spillway\n").workingDir())
        .isEqualTo(Path.of("/var/lib/spillway"));
    assertThat(
            ConfigLoader.parse(
                    "working-dir: ${env:STATE}/x\n", "t.yml", BASE, Map.of("STATE", "/data")::get)
                .workingDir())
        .isEqualTo(Path.of("/data/x"));
    assertThat(error("working-dir: ''\n"))
        .isEqualTo("spillway.yml:1: working-dir must not be empty.");
  }

  @Test
  void should_read_spillway_yml_from_the_current_directory_when_present(@TempDir Path dir)
      throws Exception {
    Files.writeString(dir.resolve("spillway.yml"), "http:\n  port: 0\n");
    SpillwayConfig c = ConfigLoader.loadDefault(dir, NO_ENV);
    assertThat(c.http().port()).isZero();
    assertThat(c.source()).isEqualTo(dir.resolve("spillway.yml").toAbsolutePath());
  }

  @Test
  void should_name_the_file_in_loaded_errors(@TempDir Path dir) throws Exception {
    Path file = dir.resolve("spillway.yml");
    Files.writeString(file, "kafka:\n  partitions: 0\n");
    assertThatThrownBy(() -> ConfigLoader.load(file, NO_ENV))
        .isInstanceOf(ConfigException.class)
        .hasMessage(file + ":2: kafka.partitions must be between 1 and 10000, not 0.");
  }

  @Test
  void should_refuse_a_file_that_is_not_utf8(@TempDir Path dir) throws Exception {
    Path file = dir.resolve("latin1.yml");
    Files.write(file, new byte[] {'a', ':', ' ', (byte) 0xE9, '\n'});
    assertThatThrownBy(() -> ConfigLoader.load(file, NO_ENV))
        .isInstanceOf(ConfigException.class)
        .hasMessage("config file " + file + " is not UTF-8 text.");
  }

  @Test
  void should_find_the_database_of_a_table_written_with_or_without_schema() {
    SpillwayConfig c =
        parse(
            "databases:\n"
                + "  main: { url: 'jdbc:postgresql://a/app', username: a }\n"
                + "  ci: { url: 'jdbc:postgresql://b/ci', username: b }\n"
                + "tables:\n"
                + "  ci_pipelines: ci\n"
                + "  ci.builds: ci\n");
    assertThat(c.databaseNames()).containsExactly("main", "ci");
    assertThat(c.tables())
        .containsExactly(Map.entry("public.ci_pipelines", "ci"), Map.entry("ci.builds", "ci"));
    assertThat(c.databaseOf("ci_pipelines")).isEqualTo("ci");
    assertThat(c.databaseOf("public.ci_pipelines")).isEqualTo("ci");
    assertThat(c.databaseOf("ci.builds")).isEqualTo("ci");
    assertThat(c.databaseOf("builds")).isEqualTo("main");
    assertThat(c.databaseOf("projects")).isEqualTo("main");
  }

  @Test
  void should_accept_tables_in_main_when_databases_are_embedded() {
    assertThat(parse("tables:\n  projects: main\n").databaseOf("projects")).isEqualTo("main");
  }

  @Test
  void should_reject_tables_pointing_at_an_unknown_database() {
    assertThat(error("tables:\n  ci_pipelines: ci\n"))
        .isEqualTo(
            "spillway.yml:2: tables.ci_pipelines names database 'ci', which is not configured"
                + " (known: main).");
    assertThat(
            error(
                "databases:\n  app: { url: 'jdbc:postgresql://a/app', username: a }\n"
                    + "tables:\n  projects: main\n"))
        .isEqualTo(
            "spillway.yml:4: tables.projects names database 'main', which is not configured"
                + " (known: app).");
  }

  @Test
  void should_reject_a_table_named_twice_or_malformed() {
    assertThat(error("tables:\n  projects: main\n  public.projects: main\n"))
        .isEqualTo("spillway.yml:3: tables.public.projects is the same table as projects.");
    assertThat(error("tables:\n  a.b.c: main\n"))
        .isEqualTo(
            "spillway.yml:2: tables.a.b.c is not a table name (write table or schema.table).");
    // A no-break space looks like a space, which no unquoted table name holds.
    assertThat(error("tables:\n  \"ci\u00a0pipelines\": main\n"))
        .isEqualTo(
            "spillway.yml:2: tables.ci\u00a0pipelines is not a table name (write table or"
                + " schema.table).");
    String long70 = "e".repeat(70);
    assertThat(error("tables:\n  x." + long70 + ": main\n"))
        .isEqualTo(
            "spillway.yml:2: tables.x."
                + long70
                + " is longer than the 63 bytes PostgreSQL keeps of a name, which it cuts to 'x."
                + "e".repeat(63)
                + "': write that.");
  }

  @Test
  void should_reject_a_misspelt_key_of_a_database_suggesting_the_right_one() {
    assertThat(
            error(
                "databases:\n  main:\n    url: jdbc:postgresql://x/y\n    username: a\n"
                    + "    passwrd: ${env:PW}\n"))
        .isEqualTo("spillway.yml:5: unknown key databases.main.passwrd (did you mean password?).");
  }

  @Test
  void should_reject_a_pool_size_out_of_range() {
    assertThat(
            error(
                "databases:\n  main:\n    url: jdbc:postgresql://x/y\n    username: a\n"
                    + "    pool-size: 500\n"))
        .isEqualTo("spillway.yml:5: databases.main.pool-size must be between 1 and 200, not 500.");
  }

  @Test
  void should_read_a_lock_timeout_per_database_and_refuse_one_postgresql_would_not_take() {
    SpillwayConfig c =
        parse(
            "databases:\n"
                + "  main: { url: 'jdbc:postgresql://db1/app', username: app }\n"
                + "  ci: { url: 'jdbc:postgresql://db2/ci', username: ci, lock-timeout: 500ms }\n"
                + "  ops: { url: 'jdbc:postgresql://db3/ops', username: ops, lock-timeout: 0s }\n");
    assertThat(c.databases().get("main").lockTimeout()).isEqualTo(Duration.ofSeconds(2));
    assertThat(c.databases().get("ci").lockTimeout()).isEqualTo(Duration.ofMillis(500));
    assertThat(c.databases().get("ops").lockTimeout()).isZero();
    assertThat(c.databases().get("ci").toString()).endsWith(", pool 10, lock timeout 500ms)");
    assertThat(c.databases().get("ops").toString()).endsWith(", pool 10, no lock timeout)");
    assertThat(
            error(
                "databases:\n  main:\n    url: jdbc:postgresql://x/y\n    username: a\n"
                    + "    lock-timeout: 30d\n"))
        .isEqualTo(
            "spillway.yml:5: databases.main.lock-timeout must be at most 24d (PostgreSQL's"
                + " limit), or 0s for none.");
    assertThat(
            error(
                "databases:\n  main:\n    url: jdbc:postgresql://x/y\n    username: a\n"
                    + "    lock-timeout: soon\n"))
        .isEqualTo(
            "spillway.yml:5: databases.main.lock-timeout must be a duration such as 2s or 500ms,"
                + " not 'soon'.");
  }

  @Test
  void should_mask_passwords_in_to_string_and_describe() {
    SpillwayConfig c =
        parse(
            "databases:\n"
                + "  main: { url: 'jdbc:postgresql://db1/app', username: app, password: hunter2 }\n"
                + "  ci: { url: 'jdbc:postgresql://db2/ci?user=ci&password=swordfish&ssl=true',"
                + " username: ci }\n"
                + "kafka:\n"
                + "  bootstrap-servers: k1:9092\n"
                + "  properties: { sasl.jaas.config: 'x password=\"opensesame\";' }\n");
    assertThat(c.databases().get("main").toString())
        .isEqualTo("main (jdbc:postgresql://db1/app as app, password ****, pool 10)");
    assertThat(c.databases().get("ci").toString())
        .isEqualTo("ci (jdbc:postgresql://db2/ci?user=ci&password=****&ssl=true as ci, pool 10)");
    assertThat(DatabaseConfig.redacted("jdbc:postgresql://app:s3cret@db1/app?PASSWORD=x;ssl=true"))
        .as("as status and the dashboard show it")
        .isEqualTo("jdbc:postgresql://app:****@db1/app?PASSWORD=****;ssl=true");
    assertThat(c.describe())
        .doesNotContain("hunter2", "swordfish", "opensesame")
        .contains("properties sasl.jaas.config");
    assertThat(c.toString()).doesNotContain("hunter2", "swordfish", "opensesame");
  }

  @Test
  void should_describe_the_configuration_in_a_few_lines() {
    SpillwayConfig c =
        parse(
            "http:\n  port: 9090\n"
                + "databases:\n  main: { url: 'jdbc:postgresql://db1/app', username: app }\n"
                + "tables:\n  projects: main\n"
                + "capture:\n  poll-interval: 5ms\n  heartbeat-interval: 90s\n");
    String nl = System.lineSeparator();
    assertThat(c.describe())
        .isEqualTo(
            "no config file, working-dir /srv/app/.spillway, http port 9090"
                + nl
                + "  kafka: embedded, topic-prefix spillway, partitions 6, replication-factor 1"
                + nl
                + "  databases: main (jdbc:postgresql://db1/app as app, pool 10)"
                + nl
                + "  tables: public.projects in main"
                + nl
                + "  capture: poll-interval 5ms, heartbeat-interval 90s, max-batch-size 2048,"
                + " offset-flush-interval 1s"
                + nl
                + "  health: interval 1s, hold 30s"
                + nl
                + "  sink: consumers 1, max-in-flight 2, max-attempts 3, max-rows-per-run 100000,"
                + " max-runtime-per-run 30s");
  }

  @Test
  void should_swap_to_embedded_parts_keeping_the_rest() {
    SpillwayConfig c =
        parse(
            "kafka:\n  bootstrap-servers: k1:9092\n  topic-prefix: acme\n"
                + "databases:\n  ci: { url: 'jdbc:postgresql://b/ci', username: b }\n"
                + "tables:\n  builds: ci\n");
    SpillwayConfig e = c.embedded().withHttpPort(0).withWorkingDir(Path.of("/tmp/w"));
    assertThat(e.kafka().embedded()).isTrue();
    assertThat(e.kafka().topicPrefix()).isEqualTo("acme");
    assertThat(e.embeddedDatabases()).isTrue();
    assertThat(e.databaseOf("builds")).isEqualTo("main");
    assertThat(e.http().port()).isZero();
    assertThat(e.workingDir()).isEqualTo(Path.of("/tmp/w"));
  }

  @Test
  void should_refuse_invalid_records_built_in_code() {
    assertThatThrownBy(() -> new HttpConfig(70000)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> new KafkaConfig(Optional.empty(), "a b", 1, (short) 1, Map.of()))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> new KafkaConfig(Optional.empty(), "ok", 0, (short) 1, Map.of()))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(
            () -> new KafkaConfig(Optional.empty(), "ok", 1, (short) 1, Map.of("acks", "1")))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(
            () -> new DatabaseConfig("Main", "jdbc:postgresql://x/y", "u", null, 10, LOCK))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> new DatabaseConfig("main", "jdbc:mysql://x/y", "u", null, 10, LOCK))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(
            () -> new DatabaseConfig("main", "jdbc:postgresql://x/y", "u", null, 0, LOCK))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(
            () ->
                new DatabaseConfig(
                    "main", "jdbc:postgresql://x/y", "u", null, 10, Duration.ofSeconds(-1)))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(
            () -> new CaptureConfig(Duration.ZERO, Duration.ofSeconds(1), 1, Duration.ofSeconds(1)))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void should_keep_kafka_properties_in_file_order_and_read_only() {
    KafkaConfig k =
        parse("kafka:\n  properties:\n    z.last: '1'\n    a.first: '2'\n    linger.ms: '5'\n")
            .kafka();
    assertThat(k.properties().keySet()).containsExactly("z.last", "a.first", "linger.ms");
    assertThatThrownBy(() -> k.properties().put("x", "y"))
        .isInstanceOf(UnsupportedOperationException.class);
  }
}
