package dev.spillway.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** What {@code lfk generate} leaves behind when it cannot write all it means to. */
class LfkGenerateCommandTest {
  @TempDir Path dir;

  @Test
  void should_leave_the_definitions_unchanged_when_a_migration_cannot_be_written()
      throws Exception {
    Path definitions = Files.writeString(dir.resolve("lfk.yml"), "projects: []\n");
    Path migrate = Files.writeString(dir.resolve("migrate"), "a file, not a directory");
    Map<Path, String> migrations = new LinkedHashMap<>();
    migrations.put(migrate.resolve("1_main_replace.up.sql"), "ALTER TABLE …;\n");
    migrations.put(migrate.resolve("1_main_replace.down.sql"), "ALTER TABLE …;\n");

    assertThatThrownBy(
            () -> LfkGenerateCommand.writeFiles(definitions, "changed: []\n", migrations))
        .isInstanceOf(UncheckedIOException.class)
        .hasMessage(
            "Cannot create "
                + migrate
                + ": a file of that name exists; no migration was written and "
                + definitions
                + " is unchanged");
    assertThat(definitions).hasContent("projects: []\n");
  }

  @Test
  void should_take_back_the_migrations_written_when_a_later_file_fails() throws Exception {
    Path definitions = dir.resolve("lfk.yml");
    Files.createDirectories(dir.resolve("migrate"));
    Path up = dir.resolve("migrate").resolve("1_main_replace.up.sql");
    Path taken = Files.writeString(dir.resolve("blocked"), "a file");
    Map<Path, String> migrations = new LinkedHashMap<>();
    migrations.put(up, "ALTER TABLE …;\n");
    migrations.put(taken.resolve("1_ci_replace.up.sql"), "ALTER TABLE …;\n");

    assertThatThrownBy(
            () -> LfkGenerateCommand.writeFiles(definitions, "projects: []\n", migrations))
        .isInstanceOf(UncheckedIOException.class);
    assertThat(up).as("a migration without its definitions").doesNotExist();
    assertThat(definitions).doesNotExist();
  }

  @Test
  void should_write_the_definitions_a_link_points_at_and_keep_the_link() throws Exception {
    Path kept =
        Files.writeString(
            Files.createDirectories(dir.resolve("repo")).resolve("lfk.yml"), "projects: []\n");
    Path definitions = Files.createSymbolicLink(dir.resolve("lfk.yml"), kept);
    Path up = dir.resolve("migrate").resolve("1_main_replace.up.sql");

    LfkGenerateCommand.writeFiles(definitions, "changed: []\n", Map.of(up, "ALTER TABLE …;\n"));

    assertThat(Files.isSymbolicLink(definitions)).isTrue();
    assertThat(kept).hasContent("changed: []\n");
    assertThat(up).hasContent("ALTER TABLE …;\n");
    try (var left = Files.list(dir.resolve("repo"))) {
      assertThat(left).as("no file left from the write").containsExactly(kept);
    }
  }

  @Test
  void should_keep_the_definitions_mode_and_give_a_new_file_the_usual_one() throws Exception {
    Path definitions = Files.writeString(dir.resolve("lfk.yml"), "projects: []\n");
    Set<PosixFilePermission> shared = PosixFilePermissions.fromString("rw-r--r--");
    Files.setPosixFilePermissions(definitions, shared);
    Path fresh = dir.resolve("new.yml");
    Path usual = Files.writeString(dir.resolve("usual"), "any file this process makes");

    LfkGenerateCommand.writeFiles(definitions, "changed: []\n", Map.of());
    LfkGenerateCommand.writeFiles(fresh, "changed: []\n", Map.of());

    assertThat(definitions).hasContent("changed: []\n");
    assertThat(Files.getPosixFilePermissions(definitions)).isEqualTo(shared);
    assertThat(Files.getPosixFilePermissions(fresh))
        .as("the umask's mode, as for any file made here")
        .isEqualTo(Files.getPosixFilePermissions(usual));
  }
}
