package dev.spillway.lfk;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.tuple;

import dev.spillway.event.DeletedRecord;
import dev.spillway.event.EventSerdes;
import dev.spillway.event.TopicProvisioner;
import dev.spillway.event.Topics;
import dev.spillway.jdbc.DatabaseEndpoint;
import dev.spillway.jdbc.Databases;
import dev.spillway.testing.Cli;
import dev.spillway.testing.EmbeddedInfra;
import dev.spillway.testing.TestSql;
import dev.spillway.testing.TopicReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code lfk sweep} through the command line, on the shared embedded PostgreSQL and Kafka: what it
 * reports, and the deleted records it hands to the cleanup (the cleanup itself is {@link
 * LfkContract}'s).
 */
class LfkSweepIT {
  @TempDir Path dir;

  @Test
  void should_report_then_hand_over_parents_whose_children_outlived_them() throws Exception {
    EmbeddedInfra infra = EmbeddedInfra.get();
    DatabaseEndpoint main = infra.database("sweep_main");
    String prefix = "w" + UUID.randomUUID().toString().replace("-", "").substring(0, 8);
    Topics topics = new Topics(prefix);
    try (Databases dbs = infra.databases("sweep_main")) {
      TestSql.exec(
          dbs.dataSource("sweep_main"),
          "DROP TABLE IF EXISTS merge_requests, releases, notes, projects",
          "CREATE TABLE projects (id bigint PRIMARY KEY)",
          "CREATE TABLE merge_requests (id bigserial PRIMARY KEY, project_id bigint)",
          "CREATE INDEX ON merge_requests (project_id)",
          "INSERT INTO projects SELECT g FROM generate_series(1, 20) g",
          "INSERT INTO merge_requests (project_id) SELECT 1 + g % 20 FROM generate_series(0, 39) g",
          "DELETE FROM projects WHERE id IN (3, 7)",
          // Only ids the parent never had, as when tables: names the wrong database.
          "CREATE TABLE releases (id bigserial PRIMARY KEY, project_id bigint)",
          "CREATE INDEX ON releases (project_id)",
          // No index on notes.project_id: a warning, and not swept.
          "CREATE TABLE notes (id bigserial PRIMARY KEY, project_id bigint)",
          "INSERT INTO releases (project_id) VALUES (900), (901)");
    }
    Path config = dir.resolve("spillway.yml");
    Files.writeString(
        config,
        String.format(
            """
            kafka: { bootstrap-servers: "%s", topic-prefix: %s, partitions: 1 }
            databases:
              main: { url: "%s", username: %s }
            loose-foreign-keys:
              definitions:
                merge_requests:
                  - table: projects
                    column: project_id
                    on_delete: async_delete
                releases:
                  - table: projects
                    column: project_id
                    on_delete: async_delete
                notes:
                  - table: projects
                    column: project_id
                    on_delete: async_delete
            """,
            infra.bootstrapServers(), prefix, main.url(), main.username()));

    Cli.Result dry = Cli.run("lfk", "sweep", "-c", config.toString(), "--dry-run");
    assertThat(dry.exitCode()).as(dry.err()).isZero();
    assertThat(dry.out())
        .contains("Swept 2 of 3 loose foreign keys:\n")
        .containsPattern("notes\\.project_id → projects \\(async_delete\\) +not swept: no index")
        .containsPattern(
            "merge_requests\\.project_id → projects \\(async_delete\\)  20 parent ids referred"
                + " to, 2 deleted\n")
        .containsPattern(
            "releases\\.project_id → projects \\(async_delete\\) +2 parent ids referred to, 2"
                + " deleted\n")
        .contains("Would hand to the cleanup (" + topics.deletedRecords() + "):\n")
        .containsPattern("projects \\(main\\) +4 deleted rows: 3, 7, 900, 901\n")
        .endsWith("Dry run: nothing handed over.\n")
        .doesNotContain("warning: ");
    assertThat(dry.err()).startsWith("warning: ").contains("no index on");
    assertThat(TopicProvisioner.exists(infra.bootstrapServers(), Map.of(), topics.deletedRecords()))
        .isFalse();

    Cli.Result unknown = Cli.run("lfk", "sweep", "-c", config.toString(), "issues");
    assertThat(unknown.exitCode()).isEqualTo(2);
    assertThat(unknown.err())
        .startsWith(
            "PARENT issues is not the parent of any loose foreign key (parents: projects) (see"
                + " 'spillway lfk sweep --help').");

    Cli.Result refused =
        Cli.run("lfk", "sweep", "-c", config.toString(), "--recheck-after", "0s", "projects");
    assertThat(refused.exitCode()).as(refused.err()).isEqualTo(2);
    assertThat(refused.err())
        .contains(
            "projects (database main) lacks every one of the 2 ids releases.project_id refers to:"
                + " is it the table they refer to (tables: says where it lives)? Nothing was"
                + " handed over; look with --dry-run, then hand them over with --force");
    assertThat(TopicProvisioner.exists(infra.bootstrapServers(), Map.of(), topics.deletedRecords()))
        .isFalse();

    Cli.Result run =
        Cli.run(
            "lfk",
            "sweep",
            "-c",
            config.toString(),
            "--recheck-after",
            "0s",
            "--force",
            "projects");
    assertThat(run.exitCode()).as(run.err()).isZero();
    assertThat(run.out())
        .contains("Handed to the cleanup (" + topics.deletedRecords() + "):\n")
        .containsPattern("projects \\(main\\) +4 deleted rows: 3, 7, 900, 901\n");
    List<ConsumerRecord<byte[], byte[]>> handed =
        TopicReader.readAtLeast(
            infra.bootstrapServers(), topics.deletedRecords(), 4, Duration.ofSeconds(30));
    assertThat(handed)
        .extracting(r -> new String(r.key(), StandardCharsets.UTF_8))
        .containsOnly("public.projects");
    assertThat(handed)
        .extracting(r -> EventSerdes.decodeDeletedRecord(r.value()))
        .extracting(DeletedRecord::database, d -> d.table().toString(), DeletedRecord::key)
        .containsExactly(
            tuple("main", "public.projects", Map.of("id", "3")),
            tuple("main", "public.projects", Map.of("id", "7")),
            tuple("main", "public.projects", Map.of("id", "900")),
            tuple("main", "public.projects", Map.of("id", "901")));

    Cli.Result json = Cli.run("lfk", "sweep", "-c", config.toString(), "--dry-run", "--json");
    assertThat(json.exitCode()).as(json.err()).isZero();
    assertThat(json.out())
        .contains("\"referred\" : 20")
        .contains("\"deleted\" : 2")
        .contains("\"ids\" : [ \"3\", \"7\", \"900\", \"901\" ]")
        .contains("\"dryRun\" : true");
  }
}
