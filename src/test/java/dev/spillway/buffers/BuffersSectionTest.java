package dev.spillway.buffers;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.spillway.config.ConfigException;
import dev.spillway.config.ConfigLoader;
import dev.spillway.config.SpillwayConfig;
import dev.spillway.event.TableName;
import dev.spillway.sink.SinkSettings;
import dev.spillway.testing.Cli;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class BuffersSectionTest {
  @TempDir Path dir;

  private List<BufferSettings> read(String yaml) {
    SpillwayConfig c = ConfigLoader.parse(yaml, "spillway.yml", null, dir, name -> "secret");
    return BuffersSection.read(c);
  }

  /** A class a handler may name: public, with a constructor without arguments. */
  public static final class NoopHandler implements BulkHandler {
    @Override
    public Result handle(Batch batch) {
      return Result.success();
    }
  }

  @Test
  void should_apply_the_defaults_to_a_buffer_that_names_only_its_handler() {
    BufferSettings b =
        read("""
                buffers:
                  contact_activity_events:
                    handler:
                      http: { url: "http://crm.local/bulk" }
                """)
            .get(0);
    assertThat(b.name()).isEqualTo("contact_activity_events");
    assertThat(b.table()).isEqualTo(new TableName("public", "contact_activity_events"));
    assertThat(b.database()).isEqualTo("main");
    assertThat(b.batchSize()).isEqualTo(1000);
    assertThat(b.maxWait()).isEqualTo(Duration.ofSeconds(2));
    assertThat(b.maxAttempts()).isEqualTo(BufferSettings.DEFAULT_MAX_ATTEMPTS);
    assertThat(b.onExhausted()).isEqualTo(OnExhausted.DELETE);
    assertThat(b.archiveTable()).isEmpty();
    assertThat(b.maxInFlight()).isEqualTo(2);
    assertThat(b.rateLimit()).isEmpty();
    HandlerSpec.Http h = (HandlerSpec.Http) b.handler();
    assertThat(h.url().toString()).isEqualTo("http://crm.local/bulk");
    assertThat(h.timeout()).isEqualTo(Duration.ofSeconds(10));
  }

  @Test
  void should_read_every_key() {
    List<BufferSettings> all =
        read(
            """
            databases:
              main: { url: "jdbc:postgresql://db/app", username: app }
              crm: { url: "jdbc:postgresql://db/crm", username: app }
            buffers:
              events:
                table: sync.contact_activity_events
                database: crm
                batch-size: 500
                max-wait: 250ms
                handler:
                  http:
                    url: https://crm.example/bulk
                    timeout: 3s
                    headers: { Authorization: "Bearer ${env:CRM_TOKEN}" }
                max-attempts: 7
                retry-backoff: 100ms
                on-exhausted: keep
                archive-table: sync.contact_activity_archive
                max-in-flight: 4
                rate-limit: 2.5
              synced:
                handler:
                  sql: "INSERT INTO synced SELECT id FROM synced WHERE id = ANY(:ids)"
              custom:
                handler:
                  class: dev.spillway.buffers.BuffersSectionTest$NoopHandler
            """);
    BufferSettings b = all.get(0);
    assertThat(b.table()).isEqualTo(new TableName("sync", "contact_activity_events"));
    assertThat(b.database()).isEqualTo("crm");
    assertThat(b.batchSize()).isEqualTo(500);
    assertThat(b.maxWait()).isEqualTo(Duration.ofMillis(250));
    assertThat(b.maxAttempts()).isEqualTo(7);
    assertThat(b.retryBackoff()).isEqualTo(Duration.ofMillis(100));
    assertThat(b.onExhausted()).isEqualTo(OnExhausted.KEEP);
    assertThat(b.archiveTable()).contains(new TableName("sync", "contact_activity_archive"));
    assertThat(b.maxInFlight()).isEqualTo(4);
    assertThat(b.rateLimit()).isEqualTo(Optional.of(2.5));
    assertThat(((HandlerSpec.Http) b.handler()).headers())
        .isEqualTo(Map.of("Authorization", "Bearer secret"));
    assertThat(b.handler().toString()).doesNotContain("secret");
    assertThat(all.get(1).handler()).isInstanceOf(HandlerSpec.Sql.class);
    assertThat(((HandlerSpec.JavaClass) all.get(2).handler()).type()).isEqualTo(NoopHandler.class);
  }

  @Test
  void should_keep_the_rows_of_an_sql_handlers_dead_letters_unless_told_to_delete_them() {
    List<BufferSettings> all =
        read(
            """
            buffers:
              by_default:
                handler: { sql: "SELECT :ids" }
              written:
                on-exhausted: delete
                handler: { sql: "SELECT :ids" }
              by_class:
                handler: { class: dev.spillway.buffers.BuffersSectionTest$NoopHandler }
            """);

    assertThat(all)
        .extracting(BufferSettings::onExhausted)
        .containsExactly(OnExhausted.KEEP, OnExhausted.DELETE, OnExhausted.DELETE);
  }

  @Test
  void should_give_a_buffer_run_no_time_limit_its_calls_could_reach() {
    Duration longestCalls = BufferSettings.MAX_RETRY_AFTER.multipliedBy(1000); // max-attempts
    assertThat(BufferPipeline.sinkSettings(SinkSettings.defaults(), 1).maxRuntimePerRun())
        .isGreaterThan(longestCalls.multipliedBy(100));
    assertThat(BufferPipeline.sinkSettings(SinkSettings.defaults(), 1).maxRowsPerRun())
        .isEqualTo(Long.MAX_VALUE);
  }

  @Test
  void should_step_no_buffer_batch_aside_as_those_behind_it_wait_for_the_same_table() {
    assertThat(BufferPipeline.sinkSettings(SinkSettings.defaults(), 1).stepAsideAfter()).isZero();
  }

  @Test
  void should_double_the_backoff_per_attempt_up_to_a_minute() {
    BufferSettings b =
        read("buffers:\n  e:\n    retry-backoff: 1s\n    handler: { sql: \"SELECT :ids\" }\n")
            .get(0);
    assertThat(b.backoff(1)).isEqualTo(Duration.ofSeconds(1));
    assertThat(b.backoff(3)).isEqualTo(Duration.ofSeconds(4));
    assertThat(b.backoff(20)).isEqualTo(Duration.ofMinutes(1));
  }

  @Test
  void should_wait_the_handlers_own_retry_time_within_bounds() {
    BufferSettings b =
        read("buffers:\n  e:\n    retry-backoff: 1s\n    handler: { sql: \"SELECT :ids\" }\n")
            .get(0);
    assertThat(b.retryWait(3, null)).as("none named: the backoff").isEqualTo(b.backoff(3));
    assertThat(b.retryWait(1, Duration.ofSeconds(90))).isEqualTo(Duration.ofSeconds(90));
    assertThat(b.retryWait(1, Duration.ofSeconds(-5)))
        .as("a time already passed names no wait: the backoff")
        .isEqualTo(b.backoff(1));
    assertThat(b.retryWait(2, Duration.ZERO)).as("Retry-After: 0 too").isEqualTo(b.backoff(2));
    assertThat(b.retryWait(1, Duration.ofDays(2))).isEqualTo(BufferSettings.MAX_RETRY_AFTER);
    assertThat(b.retryWait(1, Duration.ofSeconds(Long.MAX_VALUE)))
        .as("a time no sleep could be given in nanoseconds")
        .isEqualTo(BufferSettings.MAX_RETRY_AFTER);
  }

  private void refused(String yaml, String message) {
    assertThatThrownBy(() -> read(yaml)).isInstanceOf(ConfigException.class).hasMessage(message);
  }

  @Test
  void should_refuse_a_buffer_name_making_topic_names_longer_than_kafka_takes() {
    String name = "e".repeat(208);
    refused(
        "buffers:\n  " + name + ":\n    handler: { sql: \"SELECT :ids\" }\n",
        "spillway.yml:2: buffers."
            + name
            + " would give the buffer's Kafka topics names of up to 250 characters, where Kafka"
            + " takes at most 249; shorten the buffer's name.");
    String longest = "e".repeat(207);
    assertThat(
            read(
                "buffers:\n  "
                    + longest
                    + ":\n    table: events\n    handler: { sql: \"SELECT :ids\" }\n"))
        .extracting(BufferSettings::name)
        .containsExactly(longest);
  }

  @Test
  void should_refuse_a_handler_naming_several_kinds() {
    refused(
        """
        buffers:
          events:
            handler:
              http: { url: "http://crm.local/bulk" }
              sql: "SELECT :ids"
        """,
        "spillway.yml:3: buffers.events.handler must name exactly one of http, sql and class, not"
            + " several.");
  }

  @Test
  void should_refuse_a_buffer_without_a_handler() {
    refused(
        "buffers:\n  events:\n    batch-size: 10\n",
        "spillway.yml:2: buffers.events.handler is required: one of http, sql and class.");
  }

  @Test
  void should_refuse_a_class_that_is_not_on_the_class_path() {
    refused(
        "buffers:\n  events:\n    handler:\n      class: com.example.Missing\n",
        "spillway.yml:4: buffers.events.handler.class names com.example.Missing, which is not on"
            + " the class path.");
  }

  @Test
  void should_refuse_a_class_that_is_not_a_bulk_handler() {
    refused(
        "buffers:\n  events:\n    handler:\n      class: java.lang.String\n",
        "spillway.yml:4: buffers.events.handler.class names java.lang.String, which does not"
            + " implement dev.spillway.buffers.BulkHandler.");
  }

  @Test
  void should_refuse_an_empty_handler_kind_naming_what_it_takes() {
    refused(
        "buffers:\n  events:\n    handler:\n      sql:\n",
        "spillway.yml:4: buffers.events.handler.sql is empty: write the statement.");
    refused(
        "buffers:\n  events:\n    handler: { class: }\n",
        "spillway.yml:3: buffers.events.handler.class is empty: write the handler's class name.");
  }

  @Test
  void should_not_show_the_password_of_a_url_it_cannot_read() {
    refused(
        "buffers:\n  events:\n    handler:\n      http: { url: \"https://sync:s3cret@/bulk\" }\n",
        "spillway.yml:4: buffers.events.handler.http.url must be an http:// or https:// URL with a"
            + " host, not 'https://sync:****@/bulk'.");
    refused(
        "buffers:\n  events:\n    handler:\n      http: { url: \"https://sync:s3cret@crm/a b\" }\n",
        "spillway.yml:4: buffers.events.handler.http.url is not a URL ('https://sync:****@crm/a b':"
            + " illegal character in path).");
  }

  @Test
  void should_refuse_a_url_holding_credentials_without_showing_them() {
    refused(
        "buffers:\n  events:\n    handler:\n      http: { url: \"https://sync:s3cret@crm/bulk\" }\n",
        "spillway.yml:4: buffers.events.handler.http.url must not hold a user name or password,"
            + " which Java's HTTP client never sends; give them as a header, headers: {"
            + " Authorization: \"Basic ${env:NAME}\" }.");
  }

  @Test
  void should_take_a_table_once_per_database() {
    String databases =
        "databases:\n  main: { url: \"jdbc:postgresql://db1/app\", username: a }\n"
            + "  shard2: { url: \"jdbc:postgresql://db2/app\", username: a }\n";
    List<BufferSettings> shards =
        read(
            databases
                + "buffers:\n  events_main:\n    table: events\n    handler: { sql: \"SELECT"
                + " :ids\" }\n  events_shard2:\n    table: events\n    database: shard2\n"
                + "    handler: { sql: \"SELECT :ids\" }\n");
    assertThat(shards).extracting(BufferSettings::database).containsExactly("main", "shard2");
    refused(
        databases
            + "buffers:\n  a:\n    table: events\n    handler: { sql: \"SELECT :ids\" }\n"
            + "  b:\n    table: public.events\n    database: main\n"
            + "    handler: { sql: \"SELECT :ids\" }\n",
        "spillway.yml:9: buffers.b.table is the same table as buffer a's, in the same database"
            + " main.");
    String long64 = "e".repeat(64);
    refused(
        "buffers:\n  " + long64 + ":\n    handler: { sql: \"SELECT :ids\" }\n",
        "spillway.yml:2: buffers."
            + long64
            + ".table is longer than the 63 bytes PostgreSQL keeps of a name, which it cuts to '"
            + "e".repeat(63)
            + "': write that (the buffer's name, which names its table when no table is given).");
    // 36 Cyrillic letters: 72 bytes, of which PostgreSQL keeps 31 letters.
    String cyrillic = "ж".repeat(36);
    refused(
        "buffers:\n  a:\n    table: " + cyrillic + "\n    handler: { sql: \"SELECT :ids\" }\n",
        "spillway.yml:3: buffers.a.table is longer than the 63 bytes PostgreSQL keeps of a name,"
            + " which it cuts to '"
            + "ж".repeat(31)
            + "': write that.");
    refused(
        "buffers:\n  a:\n    table: \"my\u00a0events\"\n    handler: { sql: \"SELECT :ids\" }\n",
        "spillway.yml:3: buffers.a.table names a table with a space in its name, 'my\u00a0events',"
            + " which Spillway does not take; rename the table.");
    refused(
        "buffers:\n  a:\n    table: my events\n    handler: { sql: \"SELECT :ids\" }\n",
        "spillway.yml:3: buffers.a.table names a table with a space in its name, 'my events',"
            + " which Spillway does not take; rename the table.");
  }

  @Test
  void should_refuse_an_http_handler_without_a_usable_url() {
    refused(
        "buffers:\n  events:\n    handler:\n      http: { timeout: 1s }\n",
        "spillway.yml:4: buffers.events.handler.http.url is required.");
    refused(
        "buffers:\n  events:\n    handler:\n      http: { url: \"ftp://x/y\" }\n",
        "spillway.yml:4: buffers.events.handler.http.url must be an http:// or https:// URL with a"
            + " host, not 'ftp://x/y'.");
    refused(
        "buffers:\n  events:\n    handler:\n      http: { url: \"127.0.0.1:8080/bulk\" }\n",
        "spillway.yml:4: buffers.events.handler.http.url must be an http:// or https:// URL with a"
            + " host, not '127.0.0.1:8080/bulk'.");
    refused(
        "buffers:\n  events:\n    handler:\n      http: { url: \"http://crm/a bulk\" }\n",
        "spillway.yml:4: buffers.events.handler.http.url is not a URL ('http://crm/a bulk': illegal"
            + " character in path).");
    refused(
        "buffers:\n  events:\n    handler:\n      http: { url: \"http://crm:80800/bulk\" }\n",
        "spillway.yml:4: buffers.events.handler.http.url has port 80800, where a port is from 1 to"
            + " 65535.");
  }

  @Test
  void should_refuse_headers_the_http_client_would_not_send_without_showing_their_value() {
    refused(
        "buffers:\n  events:\n    handler:\n      http:\n        url: http://crm/bulk\n"
            + "        headers: { Host: crm.internal }\n",
        "spillway.yml:6: buffers.events.handler.http.headers must not set Host: Java's HTTP client"
            + " refuses that header name.");
    refused(
        "buffers:\n  events:\n    handler:\n      http:\n        url: http://crm/bulk\n"
            + "        headers: { Authorization: \"Bearer s3cret\\n\" }\n",
        "spillway.yml:6: buffers.events.handler.http.headers has a value for Authorization that"
            + " Java's HTTP client refuses (a line break, or a character beyond Latin-1).");
  }

  /** Public constructor, but the class itself is not public: it cannot be created from outside. */
  static final class HiddenHandler implements BulkHandler {
    public HiddenHandler() {}

    @Override
    public Result handle(Batch batch) {
      return Result.success();
    }
  }

  /** Public, but its constructor fails without a message. */
  public static final class FailingHandler implements BulkHandler {
    public FailingHandler() {
      throw new IllegalStateException();
    }

    @Override
    public Result handle(Batch batch) {
      return Result.success();
    }
  }

  /** Public, but its class cannot be initialized. */
  public static final class UninitializableHandler implements BulkHandler {
    static final int BROKEN = Integer.parseInt("not a number");

    @Override
    public Result handle(Batch batch) {
      return Result.success();
    }
  }

  @Test
  void should_say_why_a_handler_class_could_not_be_created() {
    for (String name : List.of("FailingHandler", "UninitializableHandler")) {
      BufferSettings b =
          read("buffers:\n  events:\n    handler:\n      class:"
                  + " dev.spillway.buffers.BuffersSectionTest$"
                  + name
                  + "\n")
              .get(0);
      // Exit 2 at the handler's line: what a restart would meet again.
      assertThatThrownBy(() -> BufferPipeline.handler(b, null, null, Clock.systemUTC()))
          .isInstanceOf(ConfigException.class)
          .hasMessageStartingWith(
              "spillway.yml:3: buffers.events names the handler class"
                  + " dev.spillway.buffers.BuffersSectionTest$"
                  + name
                  + ", which could not be created: java.lang.")
          .hasMessageNotContaining("null");
    }
  }

  @Test
  void should_refuse_a_class_that_is_not_public() {
    refused(
        "buffers:\n  events:\n    handler:\n      class: dev.spillway.buffers.BuffersSectionTest$HiddenHandler\n",
        "spillway.yml:4: buffers.events.handler.class names"
            + " dev.spillway.buffers.BuffersSectionTest$HiddenHandler, which is not public.");
  }

  @Test
  void should_say_why_a_class_on_the_class_path_could_not_be_loaded() {
    Thread thread = Thread.currentThread();
    ClassLoader before = thread.getContextClassLoader();
    thread.setContextClassLoader(
        new ClassLoader(before) {
          @Override
          protected Class<?> loadClass(String name, boolean resolve) throws ClassNotFoundException {
            if (name.equals("com.example.Sync")) {
              throw new NoClassDefFoundError("com/example/MissingDependency");
            }
            return super.loadClass(name, resolve);
          }
        });
    try {
      refused(
          "buffers:\n  events:\n    handler:\n      class: com.example.Sync\n",
          "spillway.yml:4: buffers.events.handler.class names com.example.Sync, which could not be"
              + " loaded: java.lang.NoClassDefFoundError: com/example/MissingDependency.");
    } finally {
      thread.setContextClassLoader(before);
    }
  }

  @Test
  void should_refuse_sql_without_the_ids_parameter() {
    refused(
        "buffers:\n  events:\n    handler:\n      sql: DELETE FROM x\n",
        "spillway.yml:4: buffers.events.handler.sql must use :ids, the array of the batch's ids, outside literals and comments.");
  }

  @Test
  void should_read_an_sql_handler_with_its_timeout() {
    HandlerSpec.Sql plain =
        (HandlerSpec.Sql)
            read("buffers:\n  events:\n    handler: { sql: \"SELECT :ids\" }\n").get(0).handler();
    assertThat(plain.timeout()).as("none").isZero();
    HandlerSpec.Sql timed =
        (HandlerSpec.Sql)
            read("""
                    buffers:
                      events:
                        handler:
                          sql:
                            statement: "INSERT INTO synced SELECT unnest(:ids)"
                            timeout: 30s
                    """)
                .get(0)
                .handler();
    assertThat(timed.statement()).isEqualTo("INSERT INTO synced SELECT unnest(:ids)");
    assertThat(timed.timeout()).isEqualTo(Duration.ofSeconds(30));
    refused(
        "buffers:\n  events:\n    handler:\n      sql: { statement: \"SELECT 1\" }\n",
        "spillway.yml:4: buffers.events.handler.sql.statement must use :ids, the array of the"
            + " batch's ids, outside literals and comments.");
    refused(
        "buffers:\n  events:\n    handler:\n      sql: { statement: \"SELECT :ids\", timeout: 30d }\n",
        "spillway.yml:4: buffers.events.handler.sql.timeout must be at most 24d (PostgreSQL's limit),"
            + " or 0s for none.");
    assertThatThrownBy(
            () ->
                read(
                    "buffers:\n  events:\n    handler:\n      sql: { statment: \"SELECT :ids\" }\n"))
        .hasMessageContaining(
            "unknown key buffers.events.handler.sql.statment (did you mean statement?)");
  }

  @Test
  void should_refuse_other_bad_values_naming_their_key() {
    refused(
        "buffers:\n  events:\n    on-exhausted: drop\n    handler: { sql: \"SELECT :ids\" }\n",
        "spillway.yml:3: buffers.events.on-exhausted must be delete or keep, not 'drop'.");
    refused(
        "buffers:\n  events:\n    retry-backoff: 5m\n    handler: { sql: \"SELECT :ids\" }\n",
        "spillway.yml:3: buffers.events.retry-backoff must be at most 1m, the longest it doubles"
            + " to, not 5m.");
    refused(
        "buffers:\n  events:\n    batch-size: 0\n    handler: { sql: \"SELECT :ids\" }\n",
        "spillway.yml:3: buffers.events.batch-size must be between 1 and 1000000, not 0.");
    refused(
        "buffers:\n  events:\n    rate-limit: -1\n    handler: { sql: \"SELECT :ids\" }\n",
        "spillway.yml:3: buffers.events.rate-limit must be between 0.001 and 1000000, not -1.");
    refused(
        "buffers:\n  sink:\n    handler: { sql: \"SELECT :ids\" }\n",
        "spillway.yml:2: buffers.sink is not a usable buffer name: its batching stage would join"
            + " the buffers' own consumer group <prefix>.buffers.sink in Kafka; name the buffer"
            + " otherwise.");
    refused(
        "buffers:\n  delay:\n    handler: { sql: \"SELECT :ids\" }\n",
        "spillway.yml:2: buffers.delay is not a usable buffer name: its batching stage would join"
            + " the buffers' own consumer group <prefix>.buffers.delay in Kafka; name the buffer"
            + " otherwise.");
    refused(
        "buffers:\n  e v:\n    handler: { sql: \"SELECT :ids\" }\n",
        "spillway.yml:2: buffers.e v is not a usable buffer name (letters, digits, '.', '_', '-').");
    refused(
        "buffers:\n  orders.eu:\n    table: orders_a\n    handler: { sql: \"SELECT :ids\" }\n"
            + "  orders_eu:\n    table: orders_b\n    handler: { sql: \"SELECT :ids\" }\n",
        "spillway.yml:5: buffers.orders_eu would give the buffer Kafka topics that collide with"
            + " buffer orders.eu's (Kafka takes '.' and '_' as one in topic names); name the buffer"
            + " otherwise.");
    refused(
        "buffers:\n  Orders:\n    table: orders_a\n    handler: { sql: \"SELECT :ids\" }\n"
            + "  orders:\n    table: orders_b\n    handler: { sql: \"SELECT :ids\" }\n",
        "spillway.yml:5: buffers.orders differs from buffer Orders only in case, so both would keep"
            + " their state in one directory where file names ignore case (macOS, Windows); name"
            + " the buffer otherwise.");
    refused(
        "buffers:\n  events:\n    database: ci\n    handler: { sql: \"SELECT :ids\" }\n",
        "spillway.yml:3: buffers.events.database names database 'ci', which is not configured"
            + " (known: main).");
    assertThatThrownBy(
            () ->
                read(
                    "buffers:\n  events:\n    batch_size: 5\n    handler: { sql: \"SELECT :ids\" }\n"))
        .hasMessageContaining("unknown key buffers.events.batch_size (did you mean batch-size?)");
  }

  @Test
  void should_name_a_misspelled_key_before_what_its_absence_breaks() {
    refused(
        "buffers:\n  events:\n    on-exhausted: drop\n    handlr: { sql: \"SELECT :ids\" }\n",
        "spillway.yml:4: unknown key buffers.events.handlr (did you mean handler?).");
    refused(
        "buffers:\n  events:\n    handler:\n      http:\n        urll: http://crm.example/bulk\n",
        "spillway.yml:5: unknown key buffers.events.handler.http.urll (did you mean url?).");
  }

  @Test
  void should_exit_2_naming_the_key_when_run_finds_a_bad_handler() throws Exception {
    Path config = dir.resolve("spillway.yml");
    Files.writeString(
        config,
        "working-dir: wd\nbuffers:\n  events:\n    handler:\n      http: { url: \"http://x/b\" }\n"
            + "      class: com.example.Sync\n");
    Cli.Result r = Cli.run("run", "-c", config.toString());
    assertThat(r.exitCode()).isEqualTo(2);
    assertThat(r.err().strip())
        .isEqualTo(
            config
                + ":4: buffers.events.handler must name exactly one of http, sql and class, not"
                + " several.");
    assertThat(Files.exists(dir.resolve("wd"))).as("nothing started").isFalse();
  }

  @Test
  void should_read_the_buffers_of_the_shipped_example_configuration() {
    Map<String, String> env =
        Map.of("KAFKA_PASSWORD", "k", "MAIN_PW", "m", "CI_PW", "c", "CRM_TOKEN", "t");
    SpillwayConfig c = ConfigLoader.load(Path.of("config", "spillway.example.yml"), env::get);
    List<BufferSettings> buffers = BuffersSection.read(c);
    assertThat(buffers).extracting(BufferSettings::name).isNotEmpty();
    assertThat(buffers)
        .extracting(BufferSettings::handler)
        .filteredOn(h -> h instanceof HandlerSpec.Sql)
        .singleElement()
        .extracting(h -> ((HandlerSpec.Sql) h).timeout())
        .isEqualTo(Duration.ofSeconds(30));
  }

  @Test
  void should_describe_each_handler_in_one_line_without_header_values() {
    assertThat(new HandlerSpec.Sql("INSERT INTO synced\n  SELECT unnest(:ids)").toString())
        .isEqualTo("sql INSERT INTO synced SELECT unnest(:ids)");
    assertThat(new HandlerSpec.JavaClass(NoopHandler.class).toString())
        .isEqualTo("class " + NoopHandler.class.getName());
    assertThat(
            new HandlerSpec.Http(
                    java.net.URI.create("http://h/bulk"),
                    java.util.Map.of("Authorization", "Bearer secret"),
                    java.time.Duration.ofSeconds(5))
                .toString())
        .isEqualTo("http http://h/bulk (headers [Authorization], timeout 5s)");
  }
}
