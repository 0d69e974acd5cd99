package dev.spillway.lfk;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.spillway.config.ConfigException;
import dev.spillway.config.ConfigLoader;
import dev.spillway.config.SpillwayConfig;
import dev.spillway.event.TableName;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class DefinitionsFileTest {
  @TempDir Path dir;

  private List<LooseForeignKey> read(String yaml) throws Exception {
    Path file = dir.resolve("lfk.yml");
    Files.writeString(file, yaml);
    return DefinitionsFile.read(file);
  }

  private String error(String yaml) {
    Path file = dir.resolve("lfk.yml");
    return assertThatThrownBy(
            () -> {
              Files.writeString(file, yaml);
              DefinitionsFile.read(file);
            })
        .isInstanceOf(ConfigException.class)
        .actual()
        .getMessage()
        .replace(file.toString(), "lfk.yml");
  }

  @Test
  void should_read_gitlab_definitions_as_they_are() throws Exception {
    List<LooseForeignKey> keys =
        read(
            """
            ---
            ci_pipelines:
              - table: merge_requests
                column: merge_request_id
                on_delete: async_delete
              - table: users
                column: user_id
                on_delete: :async_nullify
            packages:
              - table: projects
                column: project_id
                on_delete: update_column_to
                target_column: status
                target_value: 4
                delete_limit: 250
            ci.builds:
              - table: ci.pipelines
                column: pipeline_id
                on_delete: async_delete
                conditions:
                  - column: status
                    value: pending
                  - column: archived_at
            """);
    assertThat(keys)
        .extracting(LooseForeignKey::describe)
        .containsExactly(
            "ci_pipelines.merge_request_id → merge_requests (async_delete)",
            "ci_pipelines.user_id → users (async_nullify)",
            "packages.project_id → projects (update_column_to)",
            "ci.builds.pipeline_id → ci.pipelines (async_delete)");
    LooseForeignKey packages = keys.get(2);
    assertThat(packages.targetColumn()).contains("status");
    assertThat(packages.targetValue()).isEqualTo(4L);
    assertThat(packages.deleteLimit()).hasValue(250);
    assertThat(packages.where()).endsWith("lfk.yml:10");
    assertThat(keys.get(3).child()).isEqualTo(new TableName("ci", "builds"));
    assertThat(keys.get(3).conditions())
        .containsExactly(
            new LooseForeignKey.Condition("status", "pending"),
            new LooseForeignKey.Condition("archived_at", null));
  }

  @Test
  void should_refuse_an_environment_reference_in_the_file_saying_where_they_are_taken() {
    assertThat(
            error(
                """
                packages:
                  - table: projects
                    column: project_id
                    on_delete: update_column_to
                    target_column: status
                    target_value: ${env:HOME}
                """))
        .isEqualTo(
            "lfk.yml:6: packages[1].target_value refers to environment variable HOME, which this"
                + " file cannot: only the configuration file's values take ${env:…}; write the"
                + " value here, or the definition in the configuration.");
  }

  @Test
  void should_accept_conditions_as_a_mapping() throws Exception {
    List<LooseForeignKey> keys =
        read(
            "notes:\n  - table: issues\n    column: noteable_id\n    on_delete: async_delete\n"
                + "    conditions: { noteable_type: Issue, system: false }\n");
    assertThat(keys.get(0).conditions())
        .containsExactly(
            new LooseForeignKey.Condition("noteable_type", "Issue"),
            new LooseForeignKey.Condition("system", false));
  }

  @Test
  void should_read_yaml_11_booleans_as_gitlab_does() throws Exception {
    // A condition read as the opposite boolean would clean the wrong children.
    List<LooseForeignKey> keys =
        read(
            "notes:\n  - table: issues\n    column: noteable_id\n    on_delete: async_delete\n"
                + "    conditions: { a: yes, b: On, c: TRUE, d: no, e: off, f: 'yes', g: y }\n");
    assertThat(keys.get(0).conditions())
        .extracting(LooseForeignKey.Condition::value)
        .containsExactly(true, true, true, false, false, "yes", "y");
  }

  @Test
  void should_take_a_null_target_value_as_setting_the_column_to_null() throws Exception {
    for (String none : List.of("null", "~", "")) {
      List<LooseForeignKey> keys =
          read(
              "packages:\n  - table: projects\n    column: project_id\n"
                  + "    on_delete: update_column_to\n    target_column: status\n"
                  + "    target_value: "
                  + none
                  + "\n");
      assertThat(keys)
          .as("target_value: %s", none)
          .singleElement()
          .satisfies(
              k -> {
                assertThat(k.onDelete()).isEqualTo(OnDelete.UPDATE_COLUMN_TO);
                assertThat(k.targetColumn()).contains("status");
                assertThat(k.targetValue()).isNull();
              });
    }
  }

  @Test
  void should_name_file_line_and_entry_of_each_bad_definition() {
    String head = "ci_pipelines:\n  - table: projects\n    column: project_id\n";
    assertThat(error(head + "    on_delete: cascade\n"))
        .isEqualTo(
            "lfk.yml:4: ci_pipelines[1].on_delete must be async_delete, async_nullify or"
                + " update_column_to, not 'cascade'.");
    assertThat(error("ci_pipelines:\n  - table: projects\n    on_delete: async_delete\n"))
        .isEqualTo("lfk.yml:2: ci_pipelines[1].column is required.");
    assertThat(error(head + "    on_delete: update_column_to\n    target_value: 4\n"))
        .isEqualTo(
            "lfk.yml:2: ci_pipelines[1].target_column is required when on_delete is"
                + " update_column_to.");
    assertThat(error(head + "    on_delete: update_column_to\n    target_column: status\n"))
        .isEqualTo(
            "lfk.yml:2: ci_pipelines[1].target_value is required when on_delete is"
                + " update_column_to.");
    assertThat(error(head + "    on_delete: async_delete\n    target_column: status\n"))
        .isEqualTo(
            "lfk.yml:5: ci_pipelines[1].target_column applies only when on_delete is"
                + " update_column_to, not async_delete.");
    assertThat(error(head + "    on_delete: async_delete\n    delete_limit: 0\n"))
        .isEqualTo("lfk.yml:5: ci_pipelines[1].delete_limit must be between 1 and 1000000, not 0.");
    assertThat(error(head + "    on_delete: async_delete\n    on_update: async_delete\n"))
        .startsWith("lfk.yml:5: unknown key ci_pipelines[1].on_update");
    assertThat(error("ci_pipelines:\n  table: projects\n"))
        .startsWith("lfk.yml:1: ci_pipelines must be a list of definitions");
    assertThat(error("ci pipelines:\n  - table: projects\n"))
        .startsWith("lfk.yml:1: ci pipelines is not a table name");
    assertThat(error("ci_pipelines:\n  - table: \"pro\u3000jects\"\n"))
        .as("an ideographic space")
        .startsWith("lfk.yml:2: ci_pipelines[1].table is not a table name");
    assertThat(error("ci_pipelines:\n  - table: " + "p".repeat(64) + "\n"))
        .startsWith(
            "lfk.yml:2: ci_pipelines[1].table is longer than the 63 bytes PostgreSQL keeps");
    assertThat(error("c" + "i".repeat(63) + ":\n  - table: projects\n"))
        .startsWith("lfk.yml:1: c" + "i".repeat(63) + " is longer than the 63 bytes");
    assertThat(
            error(
                head
                    + "    on_delete: async_delete\n"
                    + head.substring(13)
                    + "    on_delete: async_delete\n"))
        .isEqualTo(
            "lfk.yml:6: ci_pipelines[2] defines ci_pipelines.project_id → projects (async_delete)"
                + " again (first at lfk.yml:2).");
  }

  @Test
  void should_read_the_file_and_inline_definitions_of_the_section(@TempDir Path base)
      throws Exception {
    Files.writeString(
        base.resolve("lfk.yml"),
        "ci_builds:\n  - table: ci_pipelines\n    column: pipeline_id\n    on_delete: async_delete\n");
    SpillwayConfig config =
        ConfigLoader.parse(
            """
            loose-foreign-keys:
              file: lfk.yml
              batch-size: 500
              definitions:
                merge_requests:
                  - table: projects
                    column: project_id
                    on_delete: async_delete
            """,
            "spillway.yml",
            base.resolve("spillway.yml"),
            base,
            n -> null);
    LfkConfig lfk = LfkConfig.from(config);
    assertThat(lfk.settings().batchSize()).isEqualTo(500);
    assertThat(lfk.definitions())
        .extracting(LooseForeignKey::describe)
        .containsExactly(
            "ci_builds.pipeline_id → ci_pipelines (async_delete)",
            "merge_requests.project_id → projects (async_delete)");
    assertThat(lfk.definitions().get(1).where()).isEqualTo("spillway.yml:6");
  }

  /** The loose-foreign-keys section of this spillway.yml, in {@code base}. */
  private static LfkConfig lfk(Path base, String yaml) {
    return LfkConfig.from(
        ConfigLoader.parse(yaml, "spillway.yml", base.resolve("spillway.yml"), base, n -> null));
  }

  @Test
  void should_reject_a_missing_definitions_file_and_unknown_section_keys(@TempDir Path base)
      throws Exception {
    assertThatThrownBy(() -> lfk(base, "loose-foreign-keys:\n  file: nowhere.yml\n"))
        .hasMessage(
            "spillway.yml:2: loose-foreign-keys.file names "
                + base.resolve("nowhere.yml")
                + ", which does not exist.");
    java.nio.file.Files.createSymbolicLink(base.resolve("lfk.yml"), base.resolve("gone.yml"));
    assertThatThrownBy(() -> lfk(base, "loose-foreign-keys:\n  file: lfk.yml\n"))
        .as("said as the configuration file's own absence is")
        .hasMessage(
            "spillway.yml:2: loose-foreign-keys.file names "
                + base.resolve("lfk.yml")
                + ", which (a symbolic link to "
                + base.resolve("gone.yml")
                + ") does not exist.");
    java.nio.file.Files.createDirectories(base.resolve("config"));
    assertThatThrownBy(() -> lfk(base, "loose-foreign-keys:\n  file: config\n"))
        .hasMessage(
            "spillway.yml:2: loose-foreign-keys.file names "
                + base.resolve("config")
                + ", which is a directory, not a file.");
    assertThatThrownBy(
            () ->
                lfk(base, "loose-foreign-keys:\n  max-attempts: 5\n  sink:\n    max-attempts: 3\n"))
        .hasMessage(
            "spillway.yml:4: loose-foreign-keys.sink.max-attempts is set in loose-foreign-keys too;"
                + " keep one (the two would disagree).");
    assertThatThrownBy(() -> lfk(base, "loose-foreign-keys:\n  sink:\n    max-rows-per-run: 500\n"))
        .hasMessage(
            "spillway.yml:3: loose-foreign-keys.sink.max-rows-per-run has no place in"
                + " loose-foreign-keys: a cleanup run's row limits are max-deletes-per-run and"
                + " max-updates-per-run of loose-foreign-keys.");
    assertThatThrownBy(() -> lfk(base, "loose-foreign-keys:\n  batch_size: 10\n"))
        .hasMessage(
            "spillway.yml:2: unknown key loose-foreign-keys.batch_size (did you mean batch-size?).");
  }

  @Test
  void should_read_the_definitions_of_the_shipped_example_configuration() {
    java.util.Map<String, String> env =
        java.util.Map.of("KAFKA_PASSWORD", "k", "MAIN_PW", "m", "CI_PW", "c", "CRM_TOKEN", "t");
    LfkConfig lfk =
        LfkConfig.from(ConfigLoader.load(Path.of("config", "spillway.example.yml"), env::get));
    assertThat(lfk.definitions())
        .extracting(LooseForeignKey::describe)
        .containsExactly(
            "ci_pipelines.project_id → projects (async_delete)",
            "ci_pipelines.merge_request_id → merge_requests (async_nullify)",
            "ci_builds.pipeline_id → ci_pipelines (async_delete)",
            "packages.project_id → projects (update_column_to)");
    assertThat(lfk.settings().sink().consumeAfter()).isEqualTo(java.time.Duration.ofMinutes(10));
  }
}
