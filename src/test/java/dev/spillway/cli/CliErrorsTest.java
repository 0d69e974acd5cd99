package dev.spillway.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.spillway.runtime.WorkingDirectory;
import dev.spillway.testing.Cli;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;
import picocli.CommandLine;

/** Exit codes and the one-sentence errors users and scripts rely on. */
class CliErrorsTest {

  @Test
  void should_exit_2_naming_file_line_and_key_for_an_unknown_key(@TempDir Path dir)
      throws Exception {
    Path config = dir.resolve("spillway.yml");
    Files.writeString(config, "http:\n  port: 8088\nkafka:\n  bootstrap-server: localhost:9092\n");
    Cli.Result r = Cli.run("status", "--config", config.toString());
    assertThat(r.exitCode()).isEqualTo(2);
    assertThat(r.err().strip())
        .startsWith(config + ":4:")
        .contains("kafka.bootstrap-server")
        .doesNotContain("Exception")
        .doesNotContain("\n");
  }

  @Test
  void should_accept_the_config_option_before_the_command(@TempDir Path dir) throws Exception {
    Path config = dir.resolve("bad.yml");
    Files.writeString(config, "http:\n  port: eighty\n");
    Cli.Result r = Cli.run("-c", config.toString(), "status");
    assertThat(r.exitCode()).isEqualTo(2);
    assertThat(r.err()).startsWith(config + ":2:").contains("http.port");
  }

  @Test
  void should_exit_2_when_the_named_config_file_does_not_exist(@TempDir Path dir) {
    Cli.Result r = Cli.run("status", "-c", dir.resolve("missing.yml").toString());
    assertThat(r.exitCode()).isEqualTo(2);
    assertThat(r.err()).contains("missing.yml").doesNotContain("Exception");
  }

  @ParameterizedTest
  @ValueSource(
      strings = {
        "quickstart",
        "run",
        "status",
        "lag",
        "lfk",
        "lfk status",
        "lfk generate",
        "lfk sweep",
        "buffers",
        "buffers reread",
        "replay",
        "replay buffers",
        "replay lfk",
        "bench",
        "bench capture",
        "bench sink",
        "bench lfk",
        "bench buffers"
      })
  void should_show_usage_for_help_on_every_command(String command) {
    String[] words = (command + " --help").split(" ");
    Cli.Result r = Cli.run(words);
    assertThat(r.exitCode()).isEqualTo(0);
    assertThat(r.out()).startsWith("Usage: spillway " + command + " ").contains("--help");
    assertThat(r.err()).isEmpty();
  }

  @Test
  void should_exit_2_for_an_unknown_command() {
    Cli.Result r = Cli.run("frobnicate");
    assertThat(r.exitCode()).isEqualTo(2);
    assertThat(r.err().strip())
        .isEqualTo(
            "Unknown command 'frobnicate': choose one of quickstart, run, status, lag, lfk,"
                + " buffers, replay, bench, help (see 'spillway --help').");
    Cli.Result near = Cli.run("lfk", "staus");
    assertThat(near.exitCode()).isEqualTo(2);
    assertThat(near.err().strip())
        .isEqualTo(
            "Unknown command 'staus' (did you mean status?): choose one of status, generate, sweep"
                + " (see 'spillway lfk --help').");
    assertThat(Cli.run("rnu").err()).startsWith("Unknown command 'rnu' (did you mean run?): ");
    assertThat(Cli.run("stauts").err())
        .startsWith("Unknown command 'stauts' (did you mean status?): ");
    assertThat(Cli.run("ls").err())
        .as("too short to be a slip")
        .startsWith("Unknown command 'ls':");
    assertThat(Cli.run("run", "--frobnicate").err())
        .as("an unknown option, as picocli says it")
        .startsWith("Unknown option: '--frobnicate'");
    Cli.Result slip = Cli.run("run", "--olny", "buffers");
    assertThat(slip.exitCode()).isEqualTo(2);
    assertThat(slip.err().strip())
        .isEqualTo("Unknown option '--olny' (did you mean --only?) (see 'spillway run --help').");
    assertThat(Cli.run("run", "--olny=buffers").err())
        .startsWith("Unknown option '--olny' (did you mean --only?)");
  }

  @Test
  void should_exit_2_naming_the_commands_when_a_group_is_run_without_one() {
    assertMissingCommand(
        Cli.run(), "spillway", "quickstart, run, status, lag, lfk, buffers, replay, bench, help");
    assertMissingCommand(Cli.run("buffers"), "spillway buffers", "reread");
    assertMissingCommand(Cli.run("replay"), "spillway replay", "buffers, lfk");
    assertMissingCommand(Cli.run("bench"), "spillway bench", "capture, sink, lfk, buffers");
    assertMissingCommand(Cli.run("lfk"), "spillway lfk", "status, generate, sweep");
  }

  private static void assertMissingCommand(Cli.Result r, String group, String commands) {
    assertThat(r.exitCode()).isEqualTo(2);
    assertThat(r.err().strip())
        .isEqualTo("Missing command: choose one of " + commands + " (see '" + group + " --help').");
    assertThat(r.out()).isEmpty();
  }

  @Test
  void should_stop_a_start_whose_http_port_is_in_use_before_starting_anything(@TempDir Path dir)
      throws Exception {
    try (ServerSocket taken = new ServerSocket(0)) {
      Path config = dir.resolve("spillway.yml");
      Files.writeString(config, "working-dir: wd\nhttp: { port: " + taken.getLocalPort() + " }\n");
      Cli.Result r = Cli.run("run", "-c", config.toString());
      assertThat(r.exitCode()).isEqualTo(1);
      assertThat(r.err().strip())
          .isEqualTo(
              "HTTP port "
                  + taken.getLocalPort()
                  + " is already in use; set http.port to a free port (0 picks one).");
      assertThat(dir.resolve("wd/kafka")).as("no broker started").doesNotExist();
      assertThat(dir.resolve("wd/postgres")).as("no database started").doesNotExist();
    }
  }

  @Test
  void should_exit_2_before_starting_anything_for_a_working_dir_that_is_a_file(@TempDir Path dir)
      throws Exception {
    Path config = dir.resolve("spillway.yml");
    Files.writeString(config, "working-dir: spillway.yml\n");
    Cli.Result r = Cli.run("quickstart", "-c", config.toString());
    assertThat(r.exitCode()).isEqualTo(2);
    assertThat(r.err().strip())
        .isEqualTo(
            config + ":1: working-dir names " + config + ", which is a file, not a directory.");
  }

  @Test
  void should_exit_2_before_reading_any_database_for_a_migrations_dir_that_is_a_file(
      @TempDir Path dir) throws Exception {
    Path config = dir.resolve("spillway.yml");
    Files.writeString(
        config, "databases:\n  main: { url: 'jdbc:postgresql://127.0.0.1:1/none', username: a }\n");
    Cli.Result r =
        Cli.run("lfk", "generate", "-c", config.toString(), "--migrations-dir", config.toString());
    assertThat(r.exitCode()).isEqualTo(2);
    assertThat(r.err().strip())
        .isEqualTo(
            "--migrations-dir names "
                + config
                + ", which is a file, not a directory (see 'spillway lfk generate --help').");

    Path below = config.resolve("db");
    r = Cli.run("lfk", "generate", "-c", config.toString(), "--migrations-dir", below.toString());
    assertThat(r.exitCode()).isEqualTo(2);
    assertThat(r.err().strip())
        .isEqualTo(
            "--migrations-dir names "
                + below
                + ", but "
                + config
                + " is a file, not a directory (see 'spillway lfk generate --help').");
  }

  @ParameterizedTest
  @ValueSource(strings = {"lag", "replay buffers --dry-run", "lfk status"})
  void should_name_the_kafka_that_never_answers(String command, @TempDir Path dir)
      throws Exception {
    int nobody;
    try (ServerSocket closed = new ServerSocket(0)) {
      nobody = closed.getLocalPort();
    }
    Path config = dir.resolve("spillway.yml");
    Files.writeString(
        config,
        "working-dir: wd\nkafka:\n  bootstrap-servers: 127.0.0.1:"
            + nobody
            + "\n  properties: { default.api.timeout.ms: 2000, request.timeout.ms: 1000 }\n"
            + "loose-foreign-keys:\n  definitions: {}\n");
    List<String> args = new java.util.ArrayList<>(List.of(command.split(" ")));
    args.addAll(List.of("-c", config.toString()));

    Cli.Result r = Cli.run(args.toArray(String[]::new));

    assertThat(r.exitCode()).as(r.err()).isEqualTo(1);
    assertThat(r.err().strip())
        .startsWith(
            "Spillway cannot reach Kafka at 127.0.0.1:" + nobody + ": no broker answered (");
  }

  @Test
  void should_refuse_to_generate_without_a_definitions_file_before_reading_catalogs(
      @TempDir Path dir) throws Exception {
    Path config = dir.resolve("spillway.yml");
    Files.writeString(config, "working-dir: wd\n");
    Cli.Result r = Cli.run("lfk", "generate", "-c", config.toString(), "^ci_builds$");
    assertThat(r.exitCode()).isEqualTo(2);
    assertThat(r.err().strip())
        .isEqualTo(
            "loose-foreign-keys.file is not set in the configuration: name the definitions file"
                + " the generator should add to, or look first with --dry-run (see 'spillway lfk"
                + " generate --help').");
    assertThat(dir.resolve("wd")).as("no embedded database made").doesNotExist();
  }

  @Test
  void should_sweep_nothing_defined_without_starting_a_database(@TempDir Path dir)
      throws Exception {
    Path config = dir.resolve("spillway.yml");
    Files.writeString(config, "working-dir: wd\n");
    for (String dryRun : List.of("--dry-run", "--json")) {
      Cli.Result r = Cli.run("lfk", "sweep", dryRun, "-c", config.toString());
      assertThat(r.exitCode()).as(r.err()).isZero();
      if (dryRun.equals("--json")) {
        JsonNode json = new ObjectMapper().readTree(r.out());
        assertThat(json.get("keys")).as(r.out()).isEmpty();
        assertThat(json.get("deleted")).as(r.out()).isEmpty();
        assertThat(json.get("handedOver").isNull()).as(r.out()).isTrue();
      } else {
        assertThat(r.out()).isEqualTo("No loose foreign keys to sweep.\n");
      }
    }
    assertThat(dir.resolve("wd")).as("no embedded database made").doesNotExist();
  }

  @Test
  void should_exit_1_when_status_finds_nothing_running(@TempDir Path dir) throws Exception {
    Path config = dir.resolve("spillway.yml");
    Files.writeString(config, "working-dir: wd\n");
    Cli.Result r = Cli.run("status", "-c", config.toString());
    assertThat(r.exitCode()).isEqualTo(1);
    assertThat(r.err().strip()).isEqualTo("Spillway is not running in " + dir.resolve("wd") + ".");
  }

  @Test
  void should_exit_2_before_starting_anything_for_a_bad_loose_foreign_key_definition(
      @TempDir Path dir) throws Exception {
    Path config = dir.resolve("spillway.yml");
    Files.writeString(config, "working-dir: wd\nloose-foreign-keys:\n  file: lfk.yml\n");
    Files.writeString(
        dir.resolve("lfk.yml"),
        "ci_pipelines:\n  - table: projects\n    column: project_id\n    on_delete: cascade\n");
    for (Cli.Result r :
        List.of(
            Cli.run("run", "-c", config.toString()),
            Cli.run("lfk", "status", "-c", config.toString()))) {
      assertThat(r.exitCode()).isEqualTo(2);
      assertThat(r.err().strip())
          .isEqualTo(
              "lfk.yml:4: ci_pipelines[1].on_delete must be async_delete, async_nullify or"
                  + " update_column_to, not 'cascade'.");
    }
    assertThat(dir.resolve("wd")).doesNotExist();
  }

  @Test
  void should_exit_2_before_the_quickstart_starts_anything_for_a_bad_loose_foreign_keys_key(
      @TempDir Path dir) throws Exception {
    Path config = dir.resolve("spillway.yml");
    Files.writeString(config, "working-dir: wd\nloose-foreign-keys:\n  batch-sise: 10\n");
    Cli.Result r = Cli.run("quickstart", "-c", config.toString());
    assertThat(r.exitCode()).isEqualTo(2);
    assertThat(r.err().strip())
        .isEqualTo(
            config + ":3: unknown key loose-foreign-keys.batch-sise (did you mean batch-size?).");
    assertThat(dir.resolve("wd")).as("nothing started").doesNotExist();
  }

  @Test
  void should_exit_2_for_an_unknown_pipeline_in_only() {
    Cli.Result r = Cli.run("run", "--only", "lfk,frobnicate");
    assertThat(r.exitCode()).isEqualTo(2);
    assertThat(r.err()).contains("frobnicate");
  }

  @Test
  void should_list_the_commands_in_help() {
    Cli.Result r = Cli.run("--help");
    assertThat(r.exitCode()).isZero();
    assertThat(r.out()).contains("quickstart", "run", "status", "lfk", "bench");
  }

  @Test
  void should_leave_the_data_of_a_benchmark_starting_in_the_same_directory(@TempDir Path dir)
      throws Exception {
    Path config = dir.resolve("spillway.yml");
    Files.writeString(config, "working-dir: wd\n");
    Path bench = dir.resolve("wd/bench/capture");
    Path data = Files.createDirectories(bench.resolve("postgres/data")).resolve("PG_VERSION");
    Files.writeString(data, "18\n");
    // Held as a benchmark holds it while its servers start, before it says where they listen.
    try (WorkingDirectory starting = WorkingDirectory.acquire(bench)) {
      Cli.Result r = Cli.run("-c", config.toString(), "bench", "capture");

      assertThat(data).as("the starting benchmark's data").exists();
      assertThat(r.exitCode()).isEqualTo(1);
      assertThat(r.err().strip()).isEqualTo("Another benchmark is running in " + bench + ".");
    }
  }

  @Test
  void should_refuse_separate_cores_without_taskset_before_deleting_the_last_run(@TempDir Path dir)
      throws Exception {
    Path config = dir.resolve("spillway.yml");
    Files.writeString(config, "working-dir: wd\n");
    Path data =
        Files.createDirectories(dir.resolve("wd/bench/buffers/postgres/data"))
            .resolve("PG_VERSION");
    Files.writeString(data, "18\n");
    ProcessBuilder bench =
        Cli.process(
            ProcessBuilder.Redirect.PIPE,
            "-c",
            config.toString(),
            "bench",
            "buffers",
            "--separate-cores");
    bench.environment().put("PATH", dir.resolve("no-tools").toString()); // no taskset on it
    Process p = bench.start();
    String said = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);

    assertThat(p.waitFor()).as(said).isEqualTo(2);
    assertThat(said.strip())
        .isEqualTo(
            "Separate cores need taskset (util-linux), which does not run here; install it or"
                + " leave --separate-cores out (see 'spillway bench buffers --help').");
    assertThat(data).as("the last run's data").exists();
    assertThat(dir.resolve("wd/bench/buffers/kafka")).as("no broker started").doesNotExist();
  }

  @Test
  void should_exit_2_in_one_sentence_for_a_negative_bench_rate() {
    Cli.Result r = Cli.run("bench", "buffers", "--rate", "-5");
    assertThat(r.exitCode()).isEqualTo(2);
    assertThat(r.err().strip())
        .startsWith("--rate must be 0 (as fast as they can) or a positive number")
        .doesNotContain("Exception");
  }

  @ParameterizedTest
  @CsvSource(
      delimiter = '|',
      value = {
        "bench lfk --children 0|--children must be positive, not 0",
        "bench sink --sub-batch -3|--sub-batch must be positive, not -3",
        "bench buffers --clients 300|--clients must be at most 100, not 300: the embedded"
            + " PostgreSQL takes 200 connections, Spillway's own among them"
      })
  void should_name_the_one_bench_option_it_refuses_before_starting_anything(
      String command, String said) {
    Cli.Result r = Cli.run(command.split(" "));
    assertThat(r.exitCode()).isEqualTo(2);
    assertThat(r.err().strip())
        .isEqualTo(
            said + " (see 'spillway " + command.substring(0, command.indexOf(" -")) + " --help').");
  }

  @ParameterizedTest
  @CsvSource({
    "replay lfk, the dead letters",
    "lag, the consumer groups",
    "lfk status, the backlog"
  })
  void should_exit_1_when_a_kafka_reader_finds_neither_kafka_nor_spillway_running(
      String command, String holding, @TempDir Path dir) throws Exception {
    Path config = dir.resolve("spillway.yml");
    Files.writeString(config, "working-dir: wd\n");
    Cli.Result r = Cli.run((command + " -c " + config).split(" "));
    assertThat(r.exitCode()).isEqualTo(1);
    assertThat(r.err().strip())
        .isEqualTo(
            "Spillway is not running in "
                + dir.resolve("wd")
                + ", and its embedded Kafka holding "
                + holding
                + " runs only with it.");
  }

  @Test
  void should_exit_2_naming_the_buffers_when_replay_is_given_another(@TempDir Path dir)
      throws Exception {
    Path config = dir.resolve("spillway.yml");
    Files.writeString(
        config, "working-dir: wd\nbuffers:\n  events:\n    handler:\n      sql: \"SELECT :ids\"\n");
    // -n, --dry-run's short form as in lfk's commands, is taken: the sentence is the buffer's.
    Cli.Result r = Cli.run("replay", "buffers", "-n", "--buffer", "evnts", "-c", config.toString());
    assertThat(r.exitCode()).isEqualTo(2);
    assertThat(r.err().strip())
        .isEqualTo(
            "--buffer evnts is not a buffer of the configuration (buffers: events) (see 'spillway"
                + " replay buffers --help').");
  }

  @Test
  void should_exit_2_naming_the_parents_when_replay_is_given_another_table(@TempDir Path dir)
      throws Exception {
    Path config = dir.resolve("spillway.yml");
    Files.writeString(
        config,
        "working-dir: wd\nloose-foreign-keys:\n  definitions:\n    issues:\n      - table:"
            + " projects\n        column: project_id\n        on_delete: async_delete\n");
    Cli.Result r = Cli.run("replay", "lfk", "--table", "projcts", "-c", config.toString());
    assertThat(r.exitCode()).isEqualTo(2);
    assertThat(r.err().strip())
        .isEqualTo(
            "--table projcts is not the parent table of a loose foreign key of the configuration"
                + " (parents: public.projects) (see 'spillway replay lfk --help').");
  }

  @ParameterizedTest
  @CsvSource(
      delimiter = '|',
      value = {
        "replay lfk --table projects. | --table 'projects.' is not a table name: write table or"
            + " schema.table (see 'spillway replay lfk --help').",
        "lfk sweep projects. | PARENT 'projects.' is not a table name: write table or"
            + " schema.table (see 'spillway lfk sweep --help').",
        "replay buffers --since 400000000000d | Invalid value for option '--since':"
            + " '400000000000d' is before 1970-01-01T00:00:00Z, where Kafka's record times begin"
            + " (see 'spillway replay buffers --help').",
        "lfk sweep --recheck-after 200000000000d | Invalid value for option '--recheck-after':"
            + " '200000000000d' is longer than 365d (see 'spillway lfk sweep --help')."
      })
  void should_exit_2_naming_the_argument_for_a_table_or_time_out_of_bounds(
      String command, String sentence, @TempDir Path dir) throws Exception {
    Path config = dir.resolve("spillway.yml");
    Files.writeString(config, "working-dir: wd\n");
    Cli.Result r = Cli.run((command + " -c " + config).split(" "));
    assertThat(r.exitCode()).isEqualTo(2);
    assertThat(r.err().strip()).isEqualTo(sentence);
  }

  @Test
  void should_exit_2_in_one_sentence_for_a_since_that_is_no_time() {
    Cli.Result r = Cli.run("replay", "lfk", "--since", "yesterday");
    assertThat(r.exitCode()).isEqualTo(2);
    assertThat(r.err().strip())
        .startsWith("Invalid value for option '--since': 'yesterday' is neither an instant")
        .doesNotContain("Exception");
  }

  @Test
  void should_exit_1_with_one_sentence_when_a_command_ends_in_an_error() {
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();

    int exit =
        SpillwayCommand.execute(
            new ThreadStarved(), new PrintWriter(out, true), new PrintWriter(err, true));

    assertThat(exit).isEqualTo(1);
    assertThat(err.toString())
        .isEqualTo(
            "Spillway stopped: OutOfMemoryError, unable to create native thread: possibly out of"
                + " memory or process/resource limits reached.\n");
  }

  /** A command whose start asks for a thread the system will not give. */
  @CommandLine.Command(name = "starved")
  static final class ThreadStarved implements Runnable {
    @Override
    public void run() {
      throw new OutOfMemoryError(
          "unable to create native thread: possibly out of memory or process/resource limits"
              + " reached");
    }
  }
}
