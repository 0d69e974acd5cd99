package dev.spillway.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import java.util.function.Function;
import org.junit.jupiter.api.Test;

/** The typed view of one mapping that every section reads its keys through. */
class ConfigNodeTest {
  private static final Function<String, String> NO_ENV = name -> null;

  private static ConfigNode root(String yaml) {
    return root(yaml, NO_ENV);
  }

  private static ConfigNode root(String yaml, Function<String, String> env) {
    return ConfigLoader.root(yaml, "app.yml", env);
  }

  /** The message of the ConfigException that reading {@code yaml} this way throws. */
  private static String error(String yaml, Consumer<ConfigNode> read) {
    try {
      read.accept(root(yaml));
    } catch (ConfigException e) {
      return e.getMessage();
    }
    throw new AssertionError("expected a configuration error for:\n" + yaml);
  }

  @Test
  void should_read_durations_in_short_and_iso_forms() {
    ConfigNode n =
        root("a: 500ms\nb: 2s\nc: 10m\nd: 1h\ne: 1d\nf: PT2S\ng: 0s\nh: ' 3 s '\ni: PT1M30S\n");
    assertThat(n.duration("a", null)).isEqualTo(Duration.ofMillis(500));
    assertThat(n.duration("b", null)).isEqualTo(Duration.ofSeconds(2));
    assertThat(n.duration("c", null)).isEqualTo(Duration.ofMinutes(10));
    assertThat(n.duration("d", null)).isEqualTo(Duration.ofHours(1));
    assertThat(n.duration("e", null)).isEqualTo(Duration.ofDays(1));
    assertThat(n.duration("f", null)).isEqualTo(Duration.ofSeconds(2));
    assertThat(n.duration("g", null)).isZero();
    assertThat(n.duration("h", null)).isEqualTo(Duration.ofSeconds(3));
    assertThat(n.duration("i", null)).isEqualTo(Duration.ofSeconds(90));
    assertThat(n.duration("absent", Duration.ofSeconds(7))).isEqualTo(Duration.ofSeconds(7));
  }

  @Test
  void should_reject_a_bare_number_as_duration_asking_for_a_unit() {
    assertThat(
            error(
                "capture:\n  poll-interval: 10\n",
                n -> n.section("capture").duration("poll-interval", null)))
        .isEqualTo(
            "app.yml:2: capture.poll-interval must be a duration such as 2s or 500ms, not '10'.");
  }

  @Test
  void should_reject_malformed_negative_and_zero_durations() {
    assertThat(error("t: 2 weeks\n", n -> n.duration("t", null)))
        .isEqualTo("app.yml:1: t must be a duration such as 2s or 500ms, not '2 weeks'.");
    assertThat(error("t: PTXS\n", n -> n.duration("t", null)))
        .isEqualTo("app.yml:1: t must be a duration such as 2s or 500ms, not 'PTXS'.");
    assertThat(error("t: 99999999999999999999d\n", n -> n.duration("t", null)))
        .startsWith("app.yml:1: t must be a duration such as 2s");
    assertThat(error("t: PT-1S\n", n -> n.duration("t", null)))
        .isEqualTo("app.yml:1: t must not be negative.");
    assertThat(error("t: 0ms\n", n -> n.positiveDuration("t", null)))
        .isEqualTo("app.yml:1: t must be at least 1ms.");
  }

  @Test
  void should_read_integers_within_bounds() {
    ConfigNode n = root("a: 42\nb: 1_000\nc: -3\n");
    assertThat(n.integer("a", 0)).isEqualTo(42);
    assertThat(n.integer("b", 0, 1, 2000)).isEqualTo(1000);
    assertThat(n.integer("c", 0)).isEqualTo(-3);
    assertThat(n.integer("absent", 9, 1, 10)).isEqualTo(9);
  }

  @Test
  void should_reject_integers_out_of_bounds_or_malformed() {
    assertThat(error("\n\nn: 11\n", n -> n.integer("n", 1, 1, 10)))
        .isEqualTo("app.yml:3: n must be between 1 and 10, not 11.");
    assertThat(error("n: 99999999999\n", n -> n.integer("n", 1)))
        .isEqualTo("app.yml:1: n must be between -2147483648 and 2147483647, not 99999999999.");
    assertThat(error("n: 1.5\n", n -> n.integer("n", 1)))
        .isEqualTo("app.yml:1: n must be a whole number, not '1.5'.");
    assertThat(error("n: { a: 1 }\n", n -> n.integer("n", 1)))
        .isEqualTo("app.yml:1: n must be a whole number, not a mapping.");
  }

  @Test
  void should_read_booleans_decimals_and_sizes() {
    ConfigNode n = root("a: true\nb: off\nc: 0.75\nd: 64kB\ne: 4GB\nf: 512B\n");
    assertThat(n.bool("a", false)).isTrue();
    assertThat(n.bool("b", true)).isFalse();
    assertThat(n.bool("absent", true)).isTrue();
    assertThat(n.decimal("c", 0, 0, 1)).isEqualTo(0.75);
    assertThat(n.bytes("d", 0)).isEqualTo(64L << 10);
    assertThat(n.bytes("e", 0)).isEqualTo(4L << 30);
    assertThat(n.bytes("f", 0)).isEqualTo(512);
  }

  @Test
  void should_reject_a_wrong_type_naming_what_was_expected_and_found() {
    assertThat(
            error(
                "kafka:\n  bootstrap-servers: [a, b]\n",
                n -> n.section("kafka").string("bootstrap-servers", null)))
        .isEqualTo("app.yml:2: kafka.bootstrap-servers must be a string, not a list.");
    assertThat(error("enabled: maybe\n", n -> n.bool("enabled", false)))
        .isEqualTo("app.yml:1: enabled must be true or false, not 'maybe'.");
    assertThat(error("kafka: yes\n", n -> n.child("kafka")))
        .isEqualTo("app.yml:1: kafka must be a mapping, not 'yes'.");
    assertThat(error("tags: a\n", n -> n.stringList("tags")))
        .isEqualTo("app.yml:1: tags must be a list, not 'a'.");
    assertThat(error("tags:\n  - a\n  - [b]\n", n -> n.stringList("tags")))
        .isEqualTo("app.yml:3: tags must be a list of strings, not of a list.");
  }

  @Test
  void should_keep_a_quoted_value_in_a_message_on_one_short_line() {
    assertThat(
            error(
                "n: |\n  first line\n  second line that goes on and on and on and on\n",
                n -> n.integer("n", 0)))
        .isEqualTo(
            "app.yml:1: n must be a whole number, not 'first line second line that goes on and...'.");
  }

  @Test
  void should_report_a_missing_required_value_at_the_line_of_its_mapping() {
    String yaml = "# databases\n\ndatabases:\n  main:\n    username: app\n";
    assertThat(error(yaml, n -> n.children("databases").get("main").requiredString("url")))
        .isEqualTo("app.yml:4: databases.main.url is required.");
    assertThat(error("url:\nother: 1\n", n -> n.requiredString("url")))
        .isEqualTo("app.yml:1: url is required.");
  }

  @Test
  void should_name_a_misspelled_required_key_instead_of_its_absence() {
    String yaml = "databases:\n  main:\n    username: app\n    ulr: jdbc:postgresql:///app\n";
    assertThat(error(yaml, n -> n.children("databases").get("main").requiredString("url")))
        .isEqualTo("app.yml:4: unknown key databases.main.ulr (did you mean url?).");
    assertThat(error("onDelete: cascade\n", n -> n.requiredString("on-delete")))
        .isEqualTo("app.yml:1: unknown key onDelete (did you mean on-delete?).");
    assertThat(error("sxyl: 1\nsqll: 2\n", n -> n.requiredString("sql")))
        .as("the closest of two")
        .isEqualTo("app.yml:2: unknown key sqll (did you mean sql?).");
    assertThat(
            error(
                "sql-file: a.sql\nsqll: 2\n",
                n -> {
                  n.string("sqll", null); // a key of its own, read before
                  n.requiredString("sql");
                }))
        .isEqualTo("app.yml:1: sql is required.");
    // A key nothing like it is left to finish().
    assertThat(error("uri: x\nother: 1\n", n -> n.requiredString("sql")))
        .isEqualTo("app.yml:1: sql is required.");
  }

  @Test
  void should_treat_an_empty_value_as_absent() {
    ConfigNode n = root("a:\nb: ~\nc: null\n");
    assertThat(n.string("a", "d")).isEqualTo("d");
    assertThat(n.integer("b", 5)).isEqualTo(5);
    assertThat(n.child("c")).isEmpty();
    assertThat(n.has("a")).isFalse();
    n.finish();
  }

  @Test
  void should_keep_scalars_as_written() {
    ConfigNode n = root("password: 0123\nflag: yes\nversion: 1.10\n");
    assertThat(n.string("password", null)).isEqualTo("0123");
    assertThat(n.string("flag", null)).isEqualTo("yes");
    assertThat(n.string("version", null)).isEqualTo("1.10");
  }

  @Test
  void should_substitute_several_environment_variables_anywhere_in_a_value() {
    Map<String, String> env = Map.of("HOST", "db1", "PORT", "5433", "DOLLAR", "$1\\x");
    ConfigNode n =
        root(
            "url: jdbc:postgresql://${env:HOST}:${env:PORT}/app\nraw: ${env:DOLLAR}${env:DOLLAR}\n"
                + "list: [\"${env:HOST}\", plain]\nmap: { k: \"x-${env:PORT}\" }\n",
            env::get);
    assertThat(n.string("url", null)).isEqualTo("jdbc:postgresql://db1:5433/app");
    assertThat(n.string("raw", null)).isEqualTo("$1\\x$1\\x");
    assertThat(n.stringList("list")).containsExactly("db1", "plain");
    assertThat(n.stringMap("map")).containsExactly(Map.entry("k", "x-5433"));
  }

  @Test
  void should_not_substitute_a_value_that_was_not_read() {
    ConfigNode n = root("unused: ${env:NOT_SET}\n");
    n.known("unused");
    n.finish();
  }

  @Test
  void should_reject_an_unset_environment_variable_with_file_line_and_key() {
    String yaml =
        "databases:\n  main:\n    url: jdbc:postgresql://db/app\n    username: app\n\n\n"
            + "    password: \"${env:MAIN_PW}\"\n";
    assertThat(error(yaml, n -> n.children("databases").get("main").string("password", null)))
        .isEqualTo(
            "app.yml:7: databases.main.password refers to environment variable MAIN_PW,"
                + " which is not set.");
  }

  @Test
  void should_reject_a_malformed_environment_reference() {
    assertThat(error("p: ${env:MAIN-PW}\n", n -> n.string("p", null)))
        .isEqualTo(
            "app.yml:1: p refers to environment variable 'MAIN-PW', which is not a valid name"
                + " (letters, digits and '_').");
    assertThat(error("p: x${env:MAIN_PW\n", n -> n.string("p", null)))
        .isEqualTo("app.yml:1: p has a ${env: reference without its closing }.");
  }

  @Test
  void should_reject_unknown_key_with_a_suggestion_within_two_edits() {
    String yaml = "http:\n  port: 8088\nkafka:\n  bootstrap-server: localhost:9092\n";
    assertThat(
            error(
                yaml,
                n -> {
                  ConfigNode kafka = n.section("kafka");
                  kafka.string("bootstrap-servers", null);
                  kafka.string("topic-prefix", null);
                  kafka.finish();
                }))
        .isEqualTo(
            "app.yml:4: unknown key kafka.bootstrap-server (did you mean bootstrap-servers?).");
  }

  @Test
  void should_suggest_the_kebab_case_spelling_of_a_camel_or_snake_case_key() {
    Consumer<ConfigNode> capture =
        n -> {
          ConfigNode c = n.section("capture");
          c.duration("poll-interval", null);
          c.integer("max-batch-size", 1);
          c.finish();
        };
    assertThat(error("capture:\n  pollInterval: 5ms\n", capture))
        .isEqualTo("app.yml:2: unknown key capture.pollInterval (did you mean poll-interval?).");
    assertThat(error("capture:\n  max_batch_size: 5\n", capture))
        .isEqualTo("app.yml:2: unknown key capture.max_batch_size (did you mean max-batch-size?).");
  }

  @Test
  void should_list_the_known_keys_when_nothing_is_close() {
    assertThat(
            error(
                "port: 1\nfrobnicate: true\n",
                n -> {
                  n.integer("port", 0);
                  n.bool("verbose", false);
                  n.finish();
                }))
        .isEqualTo("app.yml:2: unknown key frobnicate (known keys: port, verbose).");
    assertThat(
            error(
                "x: 1\n",
                n -> {
                  n.string("db", null);
                  n.finish();
                }))
        .isEqualTo("app.yml:1: unknown key x (known keys: db).");
  }

  @Test
  void should_reject_a_duplicate_key_at_its_second_line() {
    assertThat(error("http:\n  port: 1\n  port: 2\n", n -> n.child("http")))
        .isEqualTo("app.yml:3: http.port appears twice in the same mapping (first on line 2).");
    assertThat(error("a: 1\nb: 2\na: 3\n", n -> {}))
        .isEqualTo("app.yml:3: a appears twice in the same mapping (first on line 1).");
  }

  @Test
  void should_hand_out_named_sub_mappings_in_file_order() {
    ConfigNode n =
        root("databases:\n  zeta: { url: z }\n  alpha:\n    url: a\n  mid: { url: m }\n");
    Map<String, ConfigNode> dbs = n.children("databases");
    assertThat(dbs).containsOnlyKeys("zeta", "alpha", "mid");
    assertThat(dbs.keySet()).containsExactly("zeta", "alpha", "mid");
    assertThat(dbs.get("alpha").path()).isEqualTo("databases.alpha");
    assertThat(dbs.get("alpha").line()).isEqualTo(3);
    assertThat(dbs.get("alpha").line("url")).isEqualTo(4);
    assertThat(dbs.get("alpha").requiredString("url")).isEqualTo("a");
    assertThat(n.children("absent")).isEmpty();
    n.finish();
  }

  @Test
  void should_reject_a_named_entry_that_is_not_a_mapping() {
    assertThat(error("databases:\n  main: jdbc:postgresql://x\n", n -> n.children("databases")))
        .isEqualTo("app.yml:2: databases.main must be a mapping, not 'jdbc:postgresql://x'.");
    assertThat(error("databases:\n  main:\n", n -> n.children("databases")))
        .isEqualTo("app.yml:2: databases.main must be a mapping, not empty.");
  }

  @Test
  void should_accept_any_key_in_a_free_form_map() {
    ConfigNode n =
        root("properties:\n  security.protocol: SASL_SSL\n  Weird_Key: 1\n  acks: all\n");
    assertThat(n.stringMap("properties"))
        .containsExactly(
            Map.entry("security.protocol", "SASL_SSL"),
            Map.entry("Weird_Key", "1"),
            Map.entry("acks", "all"));
    assertThat(n.stringMap("absent")).isEmpty();
    n.finish();
  }

  @Test
  void should_reject_a_free_form_value_that_is_not_a_string() {
    assertThat(error("properties:\n  a: [1]\n", n -> n.stringMap("properties")))
        .isEqualTo("app.yml:2: properties.a must be a string, not a list.");
    assertThat(error("properties:\n  a:\n", n -> n.stringMap("properties")))
        .isEqualTo("app.yml:2: properties.a must have a value.");
  }

  @Test
  void should_read_a_list_of_strings() {
    ConfigNode n = root("a: [x, y]\nb:\n  - 1\n  - two\nc: []\n");
    assertThat(n.stringList("a")).containsExactly("x", "y");
    assertThat(n.stringList("b")).containsExactly("1", "two");
    assertThat(n.stringList("c")).isEmpty();
    assertThat(n.stringList("absent")).isEqualTo(List.of());
  }

  @Test
  void should_let_a_section_report_its_own_errors_with_file_line_and_key() {
    ConfigNode handler =
        root("buffers:\n  events:\n    handler:\n      http: {}\n      sql: x\n")
            .children("buffers")
            .get("events")
            .section("handler");
    assertThat(handler.error("sql", "cannot be combined with http").getMessage())
        .isEqualTo("app.yml:5: buffers.events.handler.sql cannot be combined with http.");
    ConfigException e = handler.invalid("must name exactly one of http, sql and class");
    assertThat(e.getMessage())
        .isEqualTo(
            "app.yml:3: buffers.events.handler must name exactly one of http, sql and class.");
    assertThat(e.source()).isEqualTo("app.yml");
    assertThat(e.line()).isEqualTo(3);
    assertThat(e.key()).isEqualTo("buffers.events.handler");
  }

  @Test
  void should_point_at_the_parent_line_for_a_key_of_an_absent_section() {
    ConfigNode x = root("http:\n  port: 1\nbuffers:\n  x: {}\n").children("buffers").get("x");
    assertThatThrownBy(() -> x.section("handler").requiredString("sql"))
        .isInstanceOf(ConfigException.class)
        .hasMessage("app.yml:4: buffers.x.handler.sql is required.");
  }

  @Test
  void should_honour_yaml_anchors_and_merge_keys() {
    ConfigNode n =
        root(
            "defaults: &db { username: app, pool-size: 5 }\n"
                + "databases:\n"
                + "  main: { <<: *db, url: u1 }\n"
                + "  ci:\n"
                + "    <<: *db\n"
                + "    pool-size: 7\n"
                + "    url: u2\n");
    n.known("defaults");
    Map<String, ConfigNode> dbs = n.children("databases");
    ConfigNode main = dbs.get("main");
    assertThat(main.requiredString("username")).isEqualTo("app");
    assertThat(main.integer("pool-size", 0)).isEqualTo(5);
    ConfigNode ci = dbs.get("ci");
    assertThat(ci.integer("pool-size", 0)).isEqualTo(7);
    assertThat(ci.keys()).containsExactly("pool-size", "url", "username");
  }

  @Test
  void should_reject_a_mapping_that_merges_itself() {
    assertThat(error("a: &x\n  b: 1\n  <<: *x\n", n -> n.child("a")))
        .isEqualTo("app.yml:1: a merges itself through <<.");
  }
}
