package dev.spillway.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.spillway.sink.SinkSettings;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.function.Function;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ConfigLoaderTest {
  private static final Path BASE = Path.of("/srv/app");
  private static final Function<String, String> NO_ENV = name -> null;

  private static SpillwayConfig parse(String yaml) {
    return parse(yaml, NO_ENV);
  }

  private static SpillwayConfig parse(String yaml, Function<String, String> env) {
    return ConfigLoader.parse(yaml, "spillway.yml", BASE.resolve("spillway.yml"), BASE, env);
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
  void should_embed_everything_when_there_is_no_file(@TempDir Path dir) {
    SpillwayConfig c = ConfigLoader.loadDefault(dir, NO_ENV);
    assertThat(c.source()).isNull();
    assertThat(c.workingDir()).isEqualTo(dir.toAbsolutePath().resolve(".spillway"));
    assertThat(c.kafka().embedded()).isTrue();
    assertThat(c.embeddedDatabases()).isTrue();
    assertThat(c.databaseNames()).containsExactly("main");
    assertThat(c.http().port()).isEqualTo(8088);
    assertThat(c.capture().pollInterval()).isEqualTo(Duration.ofMillis(10));
  }

  @Test
  void should_treat_an_empty_file_as_all_defaults() {
    SpillwayConfig c = parse("");
    assertThat(c.kafka().embedded()).isTrue();
    assertThat(c.workingDir()).isEqualTo(BASE.resolve(".spillway"));
  }

  @Test
  void should_read_every_section() {
    SpillwayConfig c =
        parse(
            """
            working-dir: data/spillway
            http:
              port: 9090
            kafka:
              bootstrap-servers: k1:9092,k2:9092
              topic-prefix: acme
              partitions: 12
              replication-factor: 3
              properties:
                security.protocol: SASL_SSL
            databases:
              main: { url: "jdbc:postgresql://db1/app", username: app, password: pw, pool-size: 20 }
              ci:
                url: jdbc:postgresql://db2/ci
                username: ci
            tables:
              ci_pipelines: ci
            capture:
              poll-interval: 5ms
              heartbeat-interval: 1m
              max-batch-size: 512
              offset-flush-interval: PT2S
            """);
    assertThat(c.workingDir()).isEqualTo(BASE.resolve("data/spillway"));
    assertThat(c.http().port()).isEqualTo(9090);
    assertThat(c.kafka().bootstrapServers()).contains("k1:9092,k2:9092");
    assertThat(c.kafka().topicPrefix()).isEqualTo("acme");
    assertThat(c.kafka().partitions()).isEqualTo(12);
    assertThat(c.kafka().replicationFactor()).isEqualTo((short) 3);
    assertThat(c.kafka().properties()).isEqualTo(Map.of("security.protocol", "SASL_SSL"));
    assertThat(c.databases()).containsOnlyKeys("main", "ci");
    assertThat(c.databases().get("main").poolSize()).isEqualTo(20);
    assertThat(c.databases().get("ci").password()).isNull();
    assertThat(c.databaseOf("ci_pipelines")).isEqualTo("ci");
    assertThat(c.databaseOf("public.ci_pipelines")).isEqualTo("ci");
    assertThat(c.databaseOf("projects")).isEqualTo("main");
    assertThat(c.capture().pollInterval()).isEqualTo(Duration.ofMillis(5));
    assertThat(c.capture().heartbeatInterval()).isEqualTo(Duration.ofMinutes(1));
    assertThat(c.capture().maxBatchSize()).isEqualTo(512);
    assertThat(c.capture().offsetFlushInterval()).isEqualTo(Duration.ofSeconds(2));
  }

  @Test
  void should_substitute_environment_variables_in_values() {
    SpillwayConfig c =
        parse(
            "databases:\n  main:\n    url: jdbc:postgresql://${env:DB_HOST}:5432/app\n"
                + "    username: app\n    password: ${env:MAIN_PW}\n",
            Map.of("DB_HOST", "db1", "MAIN_PW", "s3cret")::get);
    assertThat(c.databases().get("main").url()).isEqualTo("jdbc:postgresql://db1:5432/app");
    assertThat(c.databases().get("main").password()).isEqualTo("s3cret");
  }

  @Test
  void should_reject_an_unset_environment_variable_with_file_line_and_key() {
    assertThat(
            error(
                "databases:\n  main:\n    url: jdbc:postgresql://db/app\n    username: app\n"
                    + "    password: \"${env:MAIN_PW}\"\n"))
        .isEqualTo(
            "spillway.yml:5: databases.main.password refers to environment variable MAIN_PW,"
                + " which is not set.");
  }

  @Test
  void should_refuse_client_properties_spillway_sets_itself() {
    assertThat(
            error("kafka:\n  properties:\n    security.protocol: SSL\n    producer.acks: \"1\"\n"))
        .isEqualTo(
            "spillway.yml:4: kafka.properties.producer.acks is set by Spillway itself, since"
                + " delivery, its consumer groups and its topics depend on it; remove it.");
    assertThat(error("kafka:\n  properties:\n    bootstrap.servers: k:9092\n"))
        .isEqualTo(
            "spillway.yml:3: kafka.properties.bootstrap.servers is set by Spillway itself; use"
                + " kafka.bootstrap-servers.");
    assertThat(parse("kafka:\n  properties:\n    linger.ms: 20\n").kafka().properties())
        .containsEntry("linger.ms", "20");
  }

  @Test
  void should_refuse_at_load_what_kafka_clients_would_refuse_when_built() {
    assertThat(error("kafka:\n  bootstrap-servers: kafka\n"))
        .isEqualTo(
            "spillway.yml:2: kafka.bootstrap-servers must list host:port pairs such as"
                + " kafka1:9092,kafka2:9092, not 'kafka'.");
    assertThat(error("kafka:\n  bootstrap-servers: \"k1:9092,\"\n")).endsWith("not ''.");
    assertThat(error("kafka:\n  bootstrap-servers: k1:99999\n")).endsWith("not 'k1:99999'.");
    assertThat(error("kafka:\n  bootstrap-servers: k1:99999999999\n"))
        .endsWith("not 'k1:99999999999'.");
    assertThat(error("kafka:\n  properties:\n    session.timeout.ms: 10s\n"))
        .isEqualTo(
            "spillway.yml:3: kafka.properties.session.timeout.ms is refused by Kafka: Invalid"
                + " value 10s for configuration session.timeout.ms: Not a number of type INT.");
    assertThat(error("kafka:\n  properties:\n    main.consumer.fetch.max.bytes: -1\n"))
        .startsWith(
            "spillway.yml:3: kafka.properties.main.consumer.fetch.max.bytes is refused by Kafka:"
                + " Invalid value -1 for configuration fetch.max.bytes");
    assertThat(
            parse(
                    "kafka:\n  bootstrap-servers: \"SASL_SSL://k1:9093, [::1]:9092\"\n"
                        + "  properties:\n    default.api.timeout.ms: 30000\n"
                        + "    some.interceptor.setting: anything\n")
                .kafka()
                .properties())
        .containsEntry("default.api.timeout.ms", "30000")
        .containsEntry("some.interceptor.setting", "anything");
    assertThat(error("kafka:\n  properties:\n    secuirty.protocol: SASL_SSL\n"))
        .isEqualTo(
            "spillway.yml:3: kafka.properties.secuirty.protocol is no setting of Kafka's clients"
                + " (did you mean security.protocol?); Kafka would pass it over.");
    assertThat(error("kafka:\n  properties:\n    producer.linger.sm: 5\n"))
        .endsWith("(did you mean linger.ms?); Kafka would pass it over.");
    assertThat(error("kafka:\n  properties:\n    group.idd: mine\n"))
        .as("not pointed at a setting it would then refuse")
        .isEqualTo(
            "spillway.yml:3: kafka.properties.group.idd is no setting of Kafka's clients, and"
                + " group.id, a letter or two from it, is set by Spillway itself; remove it.");
  }

  @Test
  void should_refuse_client_properties_that_would_undo_what_spillway_sets() {
    assertThat(error("kafka:\n  properties:\n    max.in.flight.requests.per.connection: 10\n"))
        .isEqualTo(
            "spillway.yml:3: kafka.properties.max.in.flight.requests.per.connection must be between"
                + " 1 and 5, since Spillway's producers are idempotent, not '10'.");
    assertThat(error("kafka:\n  properties:\n    producer.retries: 0\n"))
        .isEqualTo(
            "spillway.yml:3: kafka.properties.producer.retries must be at least 1, since"
                + " Spillway's producers are idempotent, not '0'.");
    assertThat(error("kafka:\n  properties:\n    group.protocol: consumer\n"))
        .isEqualTo(
            "spillway.yml:3: kafka.properties.group.protocol must be classic (or left out):"
                + " Spillway's consumer groups take the classic protocol, which the partition"
                + " assignment strategy Spillway sets needs.");
    assertThat(error("kafka:\n  properties:\n    main.consumer.group.instance.id: host-1\n"))
        .isEqualTo(
            "spillway.yml:3: kafka.properties.main.consumer.group.instance.id is Spillway's own:"
                + " its consumers of one group would share this static member id and fence each"
                + " other out; remove it.");
    assertThat(
            error(
                "kafka:\n  properties:\n    production.exception.handler:"
                    + " org.apache.kafka.streams.errors.DefaultProductionExceptionHandler\n"))
        .isEqualTo(
            "spillway.yml:3: kafka.properties.production.exception.handler is Spillway's own: a"
                + " handler that lets its Streams applications go on past a record they could not"
                + " read, process or send drops that record, and the rows behind it are never"
                + " handled; remove it.");
    assertThat(error("kafka:\n  properties:\n    producer.partitioner.ignore.keys: true\n"))
        .startsWith(
            "spillway.yml:3: kafka.properties.producer.partitioner.ignore.keys is Spillway's own:"
                + " its records go to partitions by key");
    assertThat(
            parse(
                    "kafka:\n  properties:\n    retries: 10\n"
                        + "    max.in.flight.requests.per.connection: 5\n"
                        + "    group.protocol: classic\n")
                .kafka()
                .properties())
        .containsEntry("group.protocol", "classic")
        .containsEntry("retries", "10")
        .containsEntry("max.in.flight.requests.per.connection", "5");
  }

  @Test
  void should_refuse_a_replication_factor_the_embedded_broker_cannot_give() {
    assertThat(error("kafka:\n  partitions: 3\n  replication-factor: 3\n"))
        .isEqualTo(
            "spillway.yml:3: kafka.replication-factor must be 1 without kafka.bootstrap-servers:"
                + " the embedded broker is a single node, not 3.");
    assertThat(
            parse("kafka:\n  bootstrap-servers: k1:9092\n  replication-factor: 3\n")
                .kafka()
                .replicationFactor())
        .isEqualTo((short) 3);
  }

  @Test
  void should_refuse_security_properties_for_the_embedded_broker() {
    assertThat(error("kafka:\n  properties:\n    linger.ms: 5\n    security.protocol: SASL_SSL\n"))
        .isEqualTo(
            "spillway.yml:4: kafka.properties.security.protocol is for a Kafka named in"
                + " kafka.bootstrap-servers, which is not set: the embedded broker takes PLAINTEXT"
                + " only, not SASL_SSL.");
    assertThat(error("kafka:\n  properties:\n    producer.security.protocol: SSL\n"))
        .startsWith("spillway.yml:3: kafka.properties.producer.security.protocol is for a Kafka");
    assertThat(
            parse("kafka:\n  properties:\n    security.protocol: PLAINTEXT\n").kafka().properties())
        .containsEntry("security.protocol", "PLAINTEXT");
    assertThat(
            parse(
                    "kafka:\n  bootstrap-servers: k1:9092\n  properties:\n"
                        + "    security.protocol: SASL_SSL\n")
                .kafka()
                .properties())
        .containsEntry("security.protocol", "SASL_SSL");
  }

  @Test
  void should_reject_unknown_key_with_file_line_and_suggestion() {
    assertThat(error("http:\n  port: 8088\nkafka:\n  bootstrap-server: localhost:9092\n"))
        .isEqualTo(
            "spillway.yml:4: unknown key kafka.bootstrap-server (did you mean bootstrap-servers?).");
  }

  @Test
  void should_name_a_misspelt_key_before_a_check_its_absence_would_fail() {
    assertThat(
            error(
                "database:\n  ci: { url: \"jdbc:postgresql://db2/ci\", username: u }\n"
                    + "tables:\n  ci_pipelines: ci\n"))
        .isEqualTo("spillway.yml:1: unknown key database (did you mean databases?).");
    assertThat(error("kafka:\n  bootstrap-server: k1:9092,k2:9092\n  replication-factor: 3\n"))
        .isEqualTo(
            "spillway.yml:2: unknown key kafka.bootstrap-server (did you mean bootstrap-servers?).");
    assertThat(error("health:\n  slot-wal-throttle: 8GB\n  slot-wal-stpo: 16GB\n"))
        .isEqualTo(
            "spillway.yml:3: unknown key health.slot-wal-stpo (did you mean slot-wal-stop?).");
  }

  @Test
  void should_reject_unknown_top_level_key_listing_known_keys() {
    assertThat(error("frobnicate: true\n"))
        .isEqualTo(
            "spillway.yml:1: unknown key frobnicate (known keys: buffers, capture, databases,"
                + " health, http, kafka, loose-foreign-keys, sink, tables, working-dir).");
  }

  @Test
  void should_refuse_the_section_of_a_pipeline_this_version_does_not_run() {
    assertThat(error("http:\n  port: 8088\nmigrations:\n  jobs: []\n"))
        .isEqualTo(
            "spillway.yml:3: migrations is a pipeline this version of Spillway does not run yet;"
                + " it runs loose-foreign-keys and buffers.");
    assertThat(error("scheduler:\n")).startsWith("spillway.yml:1: scheduler is a pipeline");
  }

  @Test
  void should_reject_a_wrong_type_naming_the_key() {
    assertThat(error("http:\n  port: eighty\n"))
        .isEqualTo("spillway.yml:2: http.port must be a whole number, not 'eighty'.");
    assertThat(error("kafka:\n  bootstrap-servers: [a, b]\n"))
        .isEqualTo("spillway.yml:2: kafka.bootstrap-servers must be a string, not a list.");
    assertThat(error("kafka: yes\n"))
        .isEqualTo("spillway.yml:1: kafka must be a mapping, not 'yes'.");
  }

  @Test
  void should_reject_a_value_out_of_range() {
    assertThat(error("http:\n  port: 70000\n"))
        .isEqualTo("spillway.yml:2: http.port must be between 0 and 65535, not 70000.");
  }

  @Test
  void should_reject_a_missing_required_value_at_its_mapping() {
    assertThat(error("http:\n  port: 1\n\n\ndatabases:\n  main:\n    username: app\n"))
        .isEqualTo("spillway.yml:6: databases.main.url is required.");
  }

  @Test
  void should_name_a_second_yaml_document_at_its_line() {
    assertThat(error("http:\n  port: 1\n---\nkafka:\n  partitions: 3\n"))
        .isEqualTo(
            "spillway.yml:3: invalid YAML: a second document ('---') begins here, where Spillway"
                + " reads one: move its settings into the first and remove the line.");
  }

  @Test
  void should_refuse_a_working_dir_only_a_shell_would_expand(@TempDir Path dir) throws Exception {
    assertThat(error("working-dir: ~/spillway\n"))
        .isEqualTo(
            "spillway.yml:1: working-dir starts with ~, which only a shell expands; write the full"
                + " path, or ${env:HOME}/spillway.");
    // Unquoted, YAML reads ~ as nothing: taken for the default, state would go elsewhere.
    assertThat(error("working-dir: ~\n"))
        .isEqualTo(
            "spillway.yml:1: working-dir has no value (YAML reads a bare ~ or null as none); write"
                + " the full path, such as ${env:HOME}/spillway, or leave the key out for"
                + " .spillway beside the file.");
    Files.createDirectories(dir.resolve("~").resolve("spillway"));
    assertThatThrownBy(
            () -> ConfigLoader.parse("working-dir: ~/spillway\n", "s.yml", dir, name -> null))
        .hasMessageEndingWith(
            " (an earlier version made "
                + dir.toAbsolutePath().resolve("~")
                + " for it, which holds its state: write ./~/spillway to go on with it).");
  }

  @Test
  void should_say_a_file_is_unreadable_rather_than_name_it_alone() {
    assertThat(
            ConfigLoader.unreadable(
                "config file /srv/s.yml", new java.nio.file.AccessDeniedException("/srv/s.yml")))
        .isEqualTo("config file /srv/s.yml may not be read by this user (permission denied)");
    assertThat(ConfigLoader.missing("config file x.yml", Path.of("/no/such/dir/x.yml")))
        .isEqualTo("config file x.yml does not exist");
  }

  @Test
  void should_reject_a_url_that_is_not_postgresql() {
    assertThat(error("databases:\n  main: { url: 'jdbc:mysql://x/y', username: a }\n"))
        .isEqualTo(
            "spillway.yml:2: databases.main.url must be a PostgreSQL JDBC URL starting with"
                + " jdbc:postgresql:.");
  }

  @Test
  void should_reject_a_url_the_driver_cannot_read_in_the_drivers_words() {
    assertThat(error("databases:\n  main: { url: 'jdbc:postgresql://h:54x32/db', username: a }\n"))
        .isEqualTo(
            "spillway.yml:2: databases.main.url is not one the PostgreSQL driver reads: JDBC URL"
                + " invalid port number: 54x32.");
    assertThat(error("databases:\n  main: { url: 'jdbc:postgresql://h:70000/db', username: a }\n"))
        .startsWith("spillway.yml:2: databases.main.url is not one the PostgreSQL driver reads: ")
        .contains("70000");
    // Settings it would refuse only when connecting, after a broker had started.
    String reads = "spillway.yml:2: databases.main.url is not one the PostgreSQL driver reads: ";
    for (Map.Entry<String, String> setting :
        Map.of(
                "sslmode=verify-fulll", "Invalid sslmode value: verify-fulll.",
                "gssEncMode=x", "Invalid gssEncMode value: x.",
                "targetServerType=primry", "Invalid targetServerType value: primry.",
                "connectTimeout=abc",
                    "connectTimeout parameter value must be an integer but was: abc.")
            .entrySet()) {
      assertThat(
              error(
                  "databases:\n  main: { url: 'jdbc:postgresql://h/db?"
                      + setting.getKey()
                      + "', username: a }\n"))
          .isEqualTo(reads + setting.getValue());
    }
    assertThat(
            parse(
                    "databases:\n  main: { url: 'jdbc:postgresql://h1:5432,h2:5433/db?sslmode=require"
                        + "&targetServerType=primary&connectTimeout=5&protocolVersion=3.2"
                        + "&loginTimeout=2.5&password=p%25ss', username: a }\n")
                .databases())
        .as("settings the driver reads otherwise than as whole numbers, an escaped %")
        .containsOnlyKeys("main");
    // Never the password, though the driver's words quote the URL.
    assertThat(
            error(
                "databases:\n  main: { url: 'jdbc:postgresql://db:5432?user=app&password=s3cret',"
                    + " username: a }\n"))
        .startsWith(reads)
        .contains("password=****")
        .doesNotContain("s3cret");
    assertThat(
            error(
                "databases:\n  main: { url: 'jdbc:postgresql://app:s3cret@db/main', username: a"
                    + " }\n"))
        .isEqualTo(
            reads
                + "a user name or password before the host, which it does not take there; give"
                + " them as username: and password:.");
    assertThat(
            error(
                "databases:\n  main: { url: 'jdbc:postgresql://db/main?password=p%ss', username:"
                    + " a }\n"))
        .isEqualTo(
            reads
                + "a '%' that begins no %-escape (two hex digits); write %25 for a '%' (in a"
                + " password, say).");
  }

  @Test
  void should_reject_a_duplicate_key_at_its_second_line() {
    assertThat(error("http:\n  port: 1\n  port: 2\n"))
        .isEqualTo(
            "spillway.yml:3: http.port appears twice in the same mapping (first on line 2).");
  }

  @Test
  void should_reject_a_bad_duration() {
    assertThat(error("capture:\n  poll-interval: 10\n"))
        .isEqualTo(
            "spillway.yml:2: capture.poll-interval must be a duration such as 2s or 500ms,"
                + " not '10'.");
    assertThat(error("capture:\n  poll-interval: 0s\n"))
        .isEqualTo("spillway.yml:2: capture.poll-interval must be at least 1ms.");
    assertThat(error("capture:\n  heartbeat-interval: 30d\n"))
        .isEqualTo(
            "spillway.yml:2: capture.heartbeat-interval must be at most 24d (Debezium's limit).");
    assertThat(parse("capture:\n  heartbeat-interval: 24d\n").capture().heartbeatInterval())
        .isEqualTo(Duration.ofDays(24));
    assertThat(error("capture:\n  offset-flush-interval: 61s\n"))
        .isEqualTo(
            "spillway.yml:2: capture.offset-flush-interval must be at most 1m (the slot keeps the"
                + " WAL since the last position stored, and a take-over publishes again what came"
                + " after it).");
    assertThat(parse("capture:\n  offset-flush-interval: 1m\n").capture().offsetFlushInterval())
        .isEqualTo(Duration.ofMinutes(1));
  }

  @Test
  void should_refuse_a_positive_duration_under_a_millisecond() {
    assertThat(error("health:\n  interval: PT0.0005S\n"))
        .isEqualTo("spillway.yml:2: health.interval must be at least 1ms.");
    assertThat(error("capture:\n  heartbeat-interval: PT0.000999S\n"))
        .isEqualTo("spillway.yml:2: capture.heartbeat-interval must be at least 1ms.");
    assertThat(parse("health:\n  interval: 1ms\n").health().interval())
        .isEqualTo(Duration.ofMillis(1));
  }

  @Test
  void should_refuse_a_duration_longer_than_a_year_naming_the_key() {
    assertThat(error("health:\n  interval: 200000000000d\n"))
        .isEqualTo("spillway.yml:2: health.interval must be at most 365d.");
    assertThat(error("sink:\n  consume-after: 366d\n"))
        .isEqualTo("spillway.yml:2: sink.consume-after must be at most 365d.");
    assertThat(
            error(
                "databases:\n  main:\n    url: jdbc:postgresql://x/y\n    username: a\n"
                    + "    lock-timeout: 200000000000d\n"))
        .isEqualTo(
            "spillway.yml:5: databases.main.lock-timeout must be at most 24d (PostgreSQL's"
                + " limit), or 0s for none.");
    assertThat(parse("sink:\n  consume-after: 365d\n").sink().consumeAfter())
        .isEqualTo(Duration.ofDays(365));
  }

  @Test
  void should_reject_a_bad_database_name() {
    assertThat(error("databases:\n  Main-DB: { url: 'jdbc:postgresql://x/y', username: a }\n"))
        .isEqualTo(
            "spillway.yml:2: databases.Main-DB is not a valid database name"
                + " (lower-case letters, digits and '_', starting with a letter).");
  }

  @Test
  void should_reject_bad_yaml_syntax_in_plain_words_at_the_line_to_look_at() {
    assertThat(error("http:\n  port: 1\n bad: [\n"))
        .isEqualTo(
            "spillway.yml:3: invalid YAML: the line's indentation matches no level above it:"
                + " indent it as the other settings of its section.");
    assertThat(error("http:\n  port: 1\n   bad: 2\n"))
        .isEqualTo(
            "spillway.yml:3: invalid YAML: a ':' where no setting can begin: indent the line as the"
                + " settings beside it, or put a value that holds ': ' in quotes.");
    assertThat(error("databases:\n  main:\n    url: jdbc:postgresql://h: 5432/db\n"))
        .startsWith("spillway.yml:3: invalid YAML: a ':' where no setting can begin");
    // A key without its ':': the parser stops on the next line; the key's line is named.
    assertThat(error("kafka:\n  bootstrap-servers\n\n  topic-prefix: x\n"))
        .isEqualTo(
            "spillway.yml:2: invalid YAML: 'bootstrap-servers' lacks the ':' after it, so the"
                + " setting on the next line cannot begin.");
    // The same among the settings of a block, not its first, and at the top level.
    assertThat(error("kafka:\n  topic-prefix: x\n  bootstrap-servers\n  partitions: 3\n"))
        .isEqualTo(
            "spillway.yml:3: invalid YAML: 'bootstrap-servers' lacks the ':' after it, so the"
                + " setting on the next line cannot begin.");
    assertThat(
            error(
                "kafka:\n  topic-prefix: x\n  bootstrap-servers  # the broker\n  partitions: 3\n"))
        .as("a comment after it")
        .isEqualTo(
            "spillway.yml:3: invalid YAML: 'bootstrap-servers' lacks the ':' after it, so the"
                + " setting on the next line cannot begin.");
    assertThat(error("http:\n  port: 1\nkafka\n  partitions: 3\n"))
        .isEqualTo(
            "spillway.yml:3: invalid YAML: 'kafka' lacks the ':' after it, so the setting on the"
                + " next line cannot begin.");
    assertThat(error("kafka:\n  topic-prefix: x\n  bootstrap-servers host:9092\n  partitions: 3\n"))
        .isEqualTo(
            "spillway.yml:3: invalid YAML: 'bootstrap-servers host:9092' is no setting: write it"
                + " as name: value, with a ':' and a space after the name.");
    // A value on a line of its own is not a key without its ':'.
    assertThat(error("kafka:\n  topic-prefix:\n    spillway\n  bootstrap-servers: a: b\n"))
        .startsWith("spillway.yml:4: invalid YAML: a ':' where no setting can begin");
    assertThat(error("http:\n  port: 1\n  - a\n"))
        .isEqualTo(
            "spillway.yml:3: invalid YAML: a list item among settings: a list is a setting's"
                + " value, each '- ' indented under that setting.");
    assertThat(error("tables:\n  - a\n  b: 1\n"))
        .isEqualTo(
            "spillway.yml:3: invalid YAML: a setting where the list above it expects its next item"
                + " (an item starts with '- ').");
    // Never closed: the line it was opened on, not the end of the file.
    assertThat(error("http:\n  port: 1\n  tables: [a\n\n\n"))
        .isEqualTo(
            "spillway.yml:3: invalid YAML: the '[' opened on this line is not closed with ']', or"
                + " its entries lack a ',' between them.");
    assertThat(error("kafka:\n  properties: {\n    a: 1\n    b: 2 }\n"))
        .isEqualTo(
            "spillway.yml:2: invalid YAML: the '{' opened on this line is not closed with '}', or"
                + " its entries lack a ',' between them (read up to line 4).");
    assertThat(error("http: {port: 1\nkafka: {}\n"))
        .isEqualTo(
            "spillway.yml:1: invalid YAML: the '{' opened on this line is not closed with '}', or"
                + " its entries lack a ',' between them (read up to line 2).");
    assertThat(error("kafka:\n  topic-prefix: \"abc\n  partitions: 3\n"))
        .isEqualTo("spillway.yml:2: invalid YAML: the quote opened on this line is never closed.");
    assertThat(error("kafka:\n  topic-prefix: @abc\n"))
        .isEqualTo(
            "spillway.yml:2: invalid YAML: '@' cannot begin a value: put the value in quotes.");
    assertThat(error("kafka: *defaults\n"))
        .isEqualTo(
            "spillway.yml:1: invalid YAML: '*defaults' refers to no anchor '&defaults' above it.");
    assertThat(error("kafka:\n\tport: 1\n"))
        .isEqualTo("spillway.yml:2: invalid YAML: a tab cannot start a token, indent with spaces.");
    // What has no plainer words keeps the parser's.
    assertThat(error("kafka: !!foo x\n"))
        .isEqualTo(
            "spillway.yml:1: invalid YAML: Global tag is not allowed: tag:yaml.org,2002:foo.");
  }

  @Test
  void should_reject_a_root_that_is_not_a_mapping() {
    assertThat(error("- a\n- b\n"))
        .isEqualTo(
            "spillway.yml:1: the file must be a mapping of settings such as 'http:', not a list.");
    assertThat(error("just words\n"))
        .isEqualTo(
            "spillway.yml:1: the file must be a mapping of settings such as 'http:',"
                + " not a single value.");
  }

  @Test
  void should_reject_a_bad_topic_prefix() {
    assertThat(error("kafka:\n  topic-prefix: 'a b'\n"))
        .isEqualTo(
            "spillway.yml:2: kafka.topic-prefix may contain only letters, digits, '_' and '-',"
                + " not 'a b'.");
  }

  @Test
  void should_refuse_a_prefix_or_database_name_making_a_slot_name_postgresql_refuses() {
    String prefix = "p".repeat(59);
    assertThat(error("kafka:\n  topic-prefix: " + prefix + "\n"))
        .isEqualTo(
            "spillway.yml:2: kafka.topic-prefix would name the replication slot and publication of"
                + " database main "
                + prefix
                + "_main, 64 characters where PostgreSQL takes at most 63; shorten"
                + " kafka.topic-prefix or the database's name.");
    String database = "d".repeat(55);
    assertThat(
            error(
                "databases:\n  main: { url: 'jdbc:postgresql://x/y', username: a }\n  "
                    + database
                    + ": { url: 'jdbc:postgresql://x/z', username: a }\n"))
        .isEqualTo(
            "spillway.yml:3: databases."
                + database
                + " would name the replication slot and publication of database "
                + database
                + " spillway_"
                + database
                + ", 64 characters where PostgreSQL takes at most 63; shorten kafka.topic-prefix"
                + " or the database's name.");
    assertThat(parse("kafka:\n  topic-prefix: " + "p".repeat(58) + "\n").kafka().topicPrefix())
        .hasSize(58);
  }

  @Test
  void should_refuse_a_spillway_yml_linking_to_a_file_not_there(@TempDir Path dir)
      throws Exception {
    Path target = dir.resolve("etc").resolve("spillway.yml");
    Path link = Files.createSymbolicLink(dir.resolve("spillway.yml"), target);

    assertThatThrownBy(() -> ConfigLoader.loadDefault(dir, NO_ENV))
        .isInstanceOf(ConfigException.class)
        .hasMessage("config file " + link + " (a symbolic link to " + target + ") does not exist.");
  }

  @Test
  void should_refuse_a_named_file_that_does_not_exist(@TempDir Path dir) {
    Path missing = dir.resolve("nope.yml");
    assertThatThrownBy(() -> ConfigLoader.load(missing, NO_ENV))
        .isInstanceOf(ConfigException.class)
        .hasMessage("config file " + missing + " does not exist.");
    assertThatThrownBy(() -> ConfigLoader.load(dir, NO_ENV))
        .isInstanceOf(ConfigException.class)
        .hasMessage("config file " + dir + " is not a regular file.");
  }

  @Test
  void should_resolve_working_dir_relative_to_the_config_file(@TempDir Path dir) throws Exception {
    Path file = dir.resolve("conf").resolve("spillway.yml");
    Files.createDirectories(file.getParent());
    Files.writeString(file, "working-dir: ../state\n");
    SpillwayConfig c = ConfigLoader.load(file, NO_ENV);
    assertThat(c.workingDir()).isEqualTo(dir.toAbsolutePath().resolve("state"));
    assertThat(c.source()).isEqualTo(file.toAbsolutePath());
  }

  @Test
  void should_refuse_a_working_dir_the_embedded_servers_cannot_take(@TempDir Path dir)
      throws Exception {
    Path file = dir.resolve("spillway.yml");
    Files.writeString(file, "working-dir: \"clients,old/state\"\n");
    assertThatThrownBy(() -> ConfigLoader.load(file, NO_ENV))
        .isInstanceOf(ConfigException.class)
        .hasMessage(
            file
                + ":1: working-dir names "
                + dir.resolve("clients,old/state")
                + ", whose ',' the embedded Kafka broker cannot take in a path; set"
                + " working-dir to a path without one.");
    Files.writeString(file, "working-dir: \"a$b\"\n");
    assertThatThrownBy(() -> ConfigLoader.load(file, NO_ENV))
        .hasMessageContaining("whose '$' the embedded PostgreSQL");

    // Neither embedded: only Streams' state lives there, which any path takes.
    Files.writeString(
        file,
        "working-dir: \"clients,old/$state\"\nkafka:\n  bootstrap-servers: k1:9092\n"
            + "databases:\n  main: { url: \"jdbc:postgresql://db/app\", username: s }\n");
    SpillwayConfig external = ConfigLoader.load(file, NO_ENV);
    assertThat(external.workingDir()).isEqualTo(dir.resolve("clients,old/$state"));
    // One embedded, the other not: only its limit holds.
    Files.writeString(
        file,
        "working-dir: \"clients,old\"\ndatabases:\n  main: { url: \"jdbc:postgresql://db/app\", username: s }\n");
    assertThatThrownBy(() -> ConfigLoader.load(file, NO_ENV))
        .hasMessageContaining("whose ',' the embedded Kafka broker");
    Files.writeString(file, "working-dir: \"clients,old\"\nkafka:\n  bootstrap-servers: k1:9092\n");
    assertThat(ConfigLoader.load(file, NO_ENV).workingDir()).isEqualTo(dir.resolve("clients,old"));
    Files.writeString(file, "working-dir: \"a$b\"\nkafka:\n  bootstrap-servers: k1:9092\n");
    assertThatThrownBy(() -> ConfigLoader.load(file, NO_ENV))
        .hasMessageContaining("whose '$' the embedded PostgreSQL");
    Files.writeString(
        file,
        "working-dir: \"a$b\"\ndatabases:\n  main: { url: \"jdbc:postgresql://db/app\", username: s }\n");
    assertThat(ConfigLoader.load(file, NO_ENV).workingDir()).isEqualTo(dir.resolve("a$b"));
    // The quickstart and benchmarks run both embedded there.
    assertThatThrownBy(external::embedded)
        .isInstanceOf(ConfigException.class)
        .hasMessage(
            file.toAbsolutePath()
                + ": working-dir names "
                + dir.resolve("clients,old/$state")
                + ", whose ',' the embedded Kafka broker cannot take in a path; set working-dir"
                + " to a path without one.");
  }

  @Test
  void should_refuse_a_working_dir_that_is_a_file_or_lies_under_one(@TempDir Path dir)
      throws Exception {
    Path file = dir.resolve("spillway.yml");
    Files.writeString(file, "working-dir: spillway.yml\n");
    assertThatThrownBy(() -> ConfigLoader.load(file, NO_ENV))
        .isInstanceOf(ConfigException.class)
        .hasMessage(file + ":1: working-dir names " + file + ", which is a file, not a directory.");
    Files.writeString(file, "http:\n  port: 1\nworking-dir: spillway.yml/state\n");
    assertThatThrownBy(() -> ConfigLoader.load(file, NO_ENV))
        .isInstanceOf(ConfigException.class)
        .hasMessage(
            file
                + ":3: working-dir names "
                + file.resolve("state")
                + ", but "
                + file
                + " is a file, not a directory.");
  }

  @Test
  void should_read_the_shipped_example_configuration() {
    Map<String, String> env =
        Map.of("KAFKA_PASSWORD", "k", "MAIN_PW", "m", "CI_PW", "c", "CRM_TOKEN", "t");
    SpillwayConfig c = ConfigLoader.load(Path.of("config", "spillway.example.yml"), env::get);
    assertThat(c.databaseOf("ci_builds")).isEqualTo("ci");
    assertThat(c.kafka().properties().get("sasl.jaas.config")).contains("password=\"k\"");
  }

  @Test
  void should_read_the_docker_configuration() {
    SpillwayConfig c =
        ConfigLoader.load(
            Path.of("docker", "spillway.yml"), Map.of("SPILLWAY_DB_PASSWORD", "s")::get);
    assertThat(c.kafka().bootstrapServers()).hasValue("kafka:9092");
    assertThat(c.databases().get("main").url()).isEqualTo("jdbc:postgresql://postgres:5432/app");
  }

  @Test
  void should_read_health_and_sink_sections() {
    SpillwayConfig c =
        parse(
            """
            health:
              interval: 500ms
              hold: 10s
              wal-archive-stop: 50
              slot-wal-stop: 8GB
              connections-throttle: 0.7
              long-transaction: 5s
              replication-lag-ignore: [dr_delayed, reports]
            sink:
              consumers: 2
              max-attempts: 5
              consume-after: 5m
              max-rows-per-run: 1000
              throttle-factor: 0.5
              step-aside-after: 0s
            """);
    assertThat(c.health().interval()).isEqualTo(Duration.ofMillis(500));
    assertThat(c.health().hold()).isEqualTo(Duration.ofSeconds(10));
    assertThat(c.health().thresholds().walArchiveStop()).isEqualTo(50);
    assertThat(c.health().thresholds().walArchiveThrottle()).isEqualTo(21);
    assertThat(c.health().thresholds().slotWalStop()).isEqualTo(8L << 30);
    assertThat(c.health().thresholds().connectionsThrottle()).isEqualTo(0.7);
    assertThat(c.health().thresholds().longTransaction()).isEqualTo(Duration.ofSeconds(5));
    assertThat(c.health().thresholds().replicationLagIgnored())
        .containsExactly("dr_delayed", "reports");
    assertThat(c.sink().consumers()).isEqualTo(2);
    assertThat(c.sink().maxAttempts()).isEqualTo(5);
    assertThat(c.sink().consumeAfter()).isEqualTo(Duration.ofMinutes(5));
    assertThat(c.sink().maxRowsPerRun()).isEqualTo(1000);
    assertThat(c.sink().throttleFactor()).isEqualTo(0.5);
    assertThat(c.sink().maxRetries()).isEqualTo(5);
    assertThat(c.sink().stepAsideAfter()).isZero();
    assertThat(parse("sink:\n  consumers: 1\n").sink().stepAsideAfter())
        .isEqualTo(SinkSettings.DEFAULT_STEP_ASIDE_AFTER);
  }

  @Test
  void should_refuse_health_thresholds_that_leave_out_the_throttle_stage() {
    assertThat(error("health:\n  wal-rate-stop: 0B\n"))
        .isEqualTo(
            "spillway.yml:2: health.wal-rate-stop must be above zero, or work would stop"
                + " whenever any WAL is written.");
    assertThat(error("health:\n  connections-throttle: 0.9\n  connections-stop: 0.9\n"))
        .isEqualTo(
            "spillway.yml:2: health.connections-throttle must be below connections-stop, or work"
                + " would stop before it is ever throttled.");
    assertThat(error("health:\n  interval: 1s\n  slot-wal-stop: 512MB\n"))
        .isEqualTo(
            "spillway.yml:3: health.slot-wal-stop must be above slot-wal-throttle (set that lower"
                + " too), or work would stop before it is ever throttled.");
    assertThat(error("health:\n  replication-lag-throttle: 2m\n"))
        .startsWith("spillway.yml:2: health.replication-lag-throttle must be below");
    assertThat(error("health:\n  wal-archive-stop: 0\n"))
        .startsWith("spillway.yml:2: health.wal-archive-stop must be above zero");
    assertThat(
            parse("health:\n  slot-wal-throttle: 256MB\n  slot-wal-stop: 512MB\n")
                .health()
                .thresholds()
                .slotWalStop())
        .isEqualTo(512L << 20);
  }

  @Test
  void should_reject_bad_health_and_sink_values() {
    assertThat(error("health:\n  slot-wal-stop: lots\n"))
        .isEqualTo(
            "spillway.yml:2: health.slot-wal-stop must be a size such as 100MB or 4GB, not 'lots'.");
    assertThat(error("health:\n  connections-stop: 1.5\n"))
        .isEqualTo("spillway.yml:2: health.connections-stop must be between 0 and 1, not 1.5.");
    assertThat(error("health:\n  replication-lag-ignore: dr_delayed\n"))
        .isEqualTo(
            "spillway.yml:2: health.replication-lag-ignore must be a list, not 'dr_delayed'.");
    assertThat(error("sink:\n  max-attempts: 0\n"))
        .isEqualTo("spillway.yml:2: sink.max-attempts must be between 1 and 1000, not 0.");
    // A delayed batch coming straight back would go round through Kafka at full speed.
    assertThat(error("sink:\n  consume-after: 0s\n"))
        .isEqualTo("spillway.yml:2: sink.consume-after must be at least 1ms.");
    assertThat(error("sink:\n  retry-backoff: 10s\n  retry-backoff-max: 1s\n"))
        .isEqualTo(
            "spillway.yml:3: sink.retry-backoff-max must not be shorter than retry-backoff.");
    assertThat(error("sink:\n  retry-backoff: 2m\n"))
        .isEqualTo(
            "spillway.yml:2: sink.retry-backoff must not be longer than retry-backoff-max, 1m"
                + " unless set (set that higher too).");
  }
}
