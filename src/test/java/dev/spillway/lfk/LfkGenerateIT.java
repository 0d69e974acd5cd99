package dev.spillway.lfk;

import static org.assertj.core.api.Assertions.assertThat;

import dev.spillway.jdbc.DatabaseEndpoint;
import dev.spillway.jdbc.Databases;
import dev.spillway.testing.Cli;
import dev.spillway.testing.EmbeddedInfra;
import dev.spillway.testing.TestSql;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The generator against real foreign keys: shown, converted, migrated, and restored. */
class LfkGenerateIT {
  @TempDir Path dir;

  /**
   * A configuration with {@code main} and, when given, {@code ci}, and the definitions file {@code
   * lfk.yml} beside it.
   */
  private Path config(DatabaseEndpoint main, DatabaseEndpoint... ci) throws IOException {
    StringBuilder yaml = new StringBuilder("databases:\n");
    yaml.append("  main:\n    url: ").append(main.url());
    yaml.append("\n    username: ").append(main.username()).append('\n');
    for (DatabaseEndpoint c : ci) {
      yaml.append("  ci:\n    url: ").append(c.url());
      yaml.append("\n    username: ").append(c.username()).append('\n');
    }
    Path config = dir.resolve("spillway.yml");
    Files.writeString(config, yaml.append("loose-foreign-keys:\n  file: lfk.yml\n").toString());
    return config;
  }

  @Test
  void should_read_which_table_has_row_security_that_applies_to_the_role() throws Exception {
    String role = "gen_rls_reader";
    try (Databases dbs = EmbeddedInfra.get().databases("gen_rls")) {
      TestSql.exec(
          dbs.dataSource("gen_rls"),
          "DROP SCHEMA IF EXISTS rls CASCADE",
          "DROP ROLE IF EXISTS " + role,
          "CREATE SCHEMA rls",
          "CREATE TABLE rls.projects (id bigint PRIMARY KEY)",
          "CREATE TABLE rls.issues (id bigint PRIMARY KEY,"
              + " project_id bigint REFERENCES rls.projects ON DELETE CASCADE)",
          "CREATE TABLE rls.notes (id bigint PRIMARY KEY,"
              + " issue_id bigint REFERENCES rls.issues ON DELETE CASCADE)",
          "ALTER TABLE rls.projects ENABLE ROW LEVEL SECURITY",
          "CREATE ROLE " + role + " LOGIN PASSWORD 'pw'",
          "GRANT USAGE ON SCHEMA rls TO " + role,
          "GRANT SELECT ON ALL TABLES IN SCHEMA rls TO " + role);
      try (Databases asRole =
          TestSql.databasesAs(EmbeddedInfra.get().database("gen_rls"), "main", role)) {
        List<ForeignKey> keys = ForeignKey.read("main", asRole.dataSource("main"));

        assertThat(keys)
            .filteredOn(k -> k.from().schema().equals("rls"))
            .extracting(k -> k.from().table(), k -> String.valueOf(k.rowSecurity()))
            .containsExactlyInAnyOrder(
                org.assertj.core.groups.Tuple.tuple("issues", "rls.projects"),
                org.assertj.core.groups.Tuple.tuple("notes", "null"));
      }
      // Not for the superuser, whom no policy binds.
      assertThat(ForeignKey.read("main", dbs.dataSource("gen_rls")))
          .filteredOn(k -> k.from().schema().equals("rls"))
          .allMatch(k -> k.rowSecurity() == null);
      TestSql.exec(dbs.dataSource("gen_rls"), "DROP SCHEMA rls CASCADE", "DROP ROLE " + role);
    }
  }

  @Test
  void should_turn_chosen_foreign_keys_into_definitions_and_a_reversible_migration()
      throws Exception {
    DatabaseEndpoint main = EmbeddedInfra.get().database("gen_main");
    try (Databases dbs = EmbeddedInfra.get().databases("gen_main")) {
      TestSql.exec(
          dbs.dataSource("gen_main"),
          "DROP TABLE IF EXISTS timeline_events, events, merge_requests, forks, projects CASCADE",
          "CREATE TABLE projects (id bigint PRIMARY KEY, path text UNIQUE)",
          "CREATE TABLE forks (id bigint PRIMARY KEY,"
              + " project_path text REFERENCES projects (path) ON DELETE CASCADE)",
          "CREATE TABLE merge_requests (id bigint PRIMARY KEY,"
              + " project_id bigint REFERENCES projects ON DELETE CASCADE)",
          "CREATE INDEX ON merge_requests (project_id)",
          "CREATE TABLE events (id bigint PRIMARY KEY,"
              + " project_id bigint REFERENCES projects ON DELETE SET NULL)",
          "CREATE TABLE timeline_events (id bigint PRIMARY KEY,"
              + " event_id bigint REFERENCES events ON DELETE RESTRICT)");
      Path config = config(main);

      Cli.Result dry = Cli.run("lfk", "generate", "-c", config.toString(), "--dry-run", "^events$");
      assertThat(dry.exitCode()).as(dry.err()).isZero();
      assertThat(dry.out())
          .contains("Showing foreign keys (4):")
          .contains("  ID | HAS_LFK |            FROM |       TO |       COLUMN | ON_DELETE")
          .contains("   2 |       N |  merge_requests | projects |   project_id |   cascade")
          .contains("Skipping 3 (timeline_events.event_id): ON DELETE RESTRICT has no loose")
          .contains(
              "events:\n  - table: projects\n    column: project_id\n    on_delete: async_nullify");
      assertThat(dir.resolve("lfk.yml")).doesNotExist();
      assertThat(dir.resolve("db")).doesNotExist();

      // A key to a unique column other than the primary key, which cleanup would match instead.
      Cli.Result toPath = Cli.run("lfk", "generate", "-c", config.toString(), "^forks$");
      assertThat(toPath.exitCode()).as(toPath.err()).isZero();
      assertThat(toPath.out())
          .contains(
              "Skipping 1 (forks.project_path): refers to projects.path, not its primary key,"
                  + " which a loose foreign key refers to")
          .contains("Nothing to convert.");
      assertThat(dir.resolve("lfk.yml")).doesNotExist();

      Cli.Result run = Cli.run("lfk", "generate", "-c", config.toString(), "project_id");
      assertThat(run.exitCode()).as(run.err()).isZero();
      assertThat(run.out()).contains("Added 2 loose foreign keys to");
      List<LooseForeignKey> written = DefinitionsFile.read(dir.resolve("lfk.yml"));
      assertThat(written)
          .extracting(LooseForeignKey::describe)
          .containsExactlyInAnyOrder(
              "events.project_id → projects (async_nullify)",
              "merge_requests.project_id → projects (async_delete)");
      Path up = migration(".up.sql");
      Path down = migration(".down.sql");

      TestSql.exec(dbs.dataSource("gen_main"), Files.readString(up));
      assertThat(foreignKeys(dbs)).isEqualTo(1); // only the RESTRICT one is left
      DefinitionCheck.Result checked =
          DefinitionCheck.check(written, t -> "main", n -> dbs.dataSource("gen_main"));
      assertThat(checked.keys()).hasSize(2);
      assertThat(checked.warnings())
          .singleElement()
          .asString()
          .contains("CREATE INDEX CONCURRENTLY \"index_events_on_project_id\"");

      Cli.Result again = Cli.run("lfk", "generate", "-c", config.toString());
      assertThat(again.out()).contains("Showing foreign keys (2):"); // RESTRICT and forks

      TestSql.exec(dbs.dataSource("gen_main"), Files.readString(down));
      assertThat(foreignKeys(dbs)).isEqualTo(3);
      Cli.Result restored = Cli.run("lfk", "generate", "-c", config.toString());
      assertThat(restored.out())
          .contains("   2 |       Y |  merge_requests | projects |   project_id |   cascade");
    }
  }

  @Test
  void should_turn_a_key_to_a_partitioned_parents_id_and_partition_into_one_on_the_id()
      throws Exception {
    DatabaseEndpoint main = EmbeddedInfra.get().database("gen_main");
    try (Databases dbs = EmbeddedInfra.get().databases("gen_main")) {
      TestSql.exec(
          dbs.dataSource("gen_main"),
          "DROP TABLE IF EXISTS pt_artifacts, pt_traces, pt_names, pt_builds, pt_tenant_things,"
              + " pt_tenants, pt_plain_uses, pt_plain CASCADE",
          // The key names the primary key's columns in another order, as GitLab's do.
          "CREATE TABLE pt_builds (partition_id int, id bigint, PRIMARY KEY (id, partition_id))"
              + " PARTITION BY LIST (partition_id)",
          "CREATE TABLE pt_builds_100 PARTITION OF pt_builds FOR VALUES IN (100)",
          "CREATE TABLE pt_artifacts (id bigint PRIMARY KEY, partition_id int NOT NULL,"
              + " build_id bigint, FOREIGN KEY (partition_id, build_id)"
              + " REFERENCES pt_builds (partition_id, id) ON DELETE CASCADE)",
          "CREATE INDEX ON pt_artifacts (build_id)",
          "CREATE TABLE pt_traces (id bigint PRIMARY KEY, partition_id int, build_id bigint,"
              + " FOREIGN KEY (partition_id, build_id) REFERENCES pt_builds (partition_id, id)"
              + " ON DELETE SET NULL)",
          // As GitLab makes them: moving a build to another partition moves its names along.
          "CREATE TABLE pt_names (id bigint PRIMARY KEY, partition_id int, build_id bigint,"
              + " FOREIGN KEY (partition_id, build_id) REFERENCES pt_builds (partition_id, id)"
              + " ON UPDATE CASCADE ON DELETE CASCADE)",
          "CREATE TABLE pt_tenants (tenant_id int, code int, PRIMARY KEY (tenant_id, code))",
          "CREATE TABLE pt_plain (tenant_id int, id bigint, PRIMARY KEY (tenant_id, id))",
          "CREATE TABLE pt_plain_uses (id bigint PRIMARY KEY, tenant_id int, plain_id bigint,"
              + " FOREIGN KEY (tenant_id, plain_id) REFERENCES pt_plain ON DELETE CASCADE)",
          "CREATE TABLE pt_tenant_things (id bigint PRIMARY KEY, tenant_id int, code int,"
              + " FOREIGN KEY (tenant_id, code) REFERENCES pt_tenants ON DELETE CASCADE)");
      Path config = config(main);

      Cli.Result run = Cli.run("lfk", "generate", "-c", config.toString(), "^pt_");
      assertThat(run.exitCode()).as(run.err()).isZero();
      assertThat(run.out())
          .containsPattern("N \\|\\s+pt_artifacts \\|\\s+pt_builds \\| partition_id,build_id \\|")
          .contains(
              "(pt_traces.partition_id,build_id): ON DELETE SET NULL of a key of several"
                  + " columns, which a loose foreign key would do to the column referring to id"
                  + " alone")
          .contains(
              "(pt_names.partition_id,build_id): ON UPDATE CASCADE changes children when their"
                  + " parent's key changes, which a loose foreign key does not do")
          .contains(
              "(pt_tenant_things.tenant_id,code): spans several columns, which do not refer to a"
                  + " partitioned parent's primary key holding id")
          .contains(
              "(pt_plain_uses.tenant_id,plain_id): pt_plain has a key of several columns and is"
                  + " not partitioned")
          .contains("Added 1 loose foreign key to");
      List<LooseForeignKey> written = DefinitionsFile.read(dir.resolve("lfk.yml"));
      assertThat(written)
          .extracting(LooseForeignKey::describe)
          .containsExactly("pt_artifacts.build_id → pt_builds (async_delete)");
      Cli.Result again = Cli.run("lfk", "generate", "-c", config.toString(), "--dry-run", "^pt_");
      assertThat(again.out())
          .as("the key made loose, until the migration drops it")
          .containsPattern("Y \\|\\s+pt_artifacts \\|");

      TestSql.exec(dbs.dataSource("gen_main"), Files.readString(migration(".up.sql")));
      assertThat(
              TestSql.count(
                  dbs.dataSource("gen_main"),
                  "SELECT count(*) FROM pg_constraint WHERE contype = 'f'"
                      + " AND conrelid = 'pt_artifacts'::regclass"))
          .isZero();
      DefinitionCheck.Result checked =
          DefinitionCheck.check(written, t -> "main", n -> dbs.dataSource("gen_main"));
      assertThat(checked.keys())
          .singleElement()
          .extracting(CheckedKey::parentPrimaryKey)
          .isEqualTo("id");
      TestSql.exec(dbs.dataSource("gen_main"), Files.readString(migration(".down.sql")));
      assertThat(
              TestSql.count(
                  dbs.dataSource("gen_main"),
                  "SELECT count(*) FROM pg_constraint WHERE contype = 'f'"
                      + " AND conparentid = 0 AND conrelid = 'pt_artifacts'::regclass"))
          .isOne();
    }
  }

  @Test
  void should_keep_every_runs_migration_when_runs_follow_each_other() throws Exception {
    DatabaseEndpoint main = EmbeddedInfra.get().database("gen_twice");
    try (Databases dbs = EmbeddedInfra.get().databases("gen_twice")) {
      TestSql.exec(
          dbs.dataSource("gen_twice"),
          "DROP TABLE IF EXISTS two_a, two_b, two_parents CASCADE",
          "CREATE TABLE two_parents (id bigint PRIMARY KEY)",
          "CREATE TABLE two_a (id bigint PRIMARY KEY,"
              + " parent_id bigint REFERENCES two_parents ON DELETE CASCADE)",
          "CREATE INDEX ON two_a (parent_id)",
          "CREATE TABLE two_b (id bigint PRIMARY KEY,"
              + " parent_id bigint REFERENCES two_parents ON DELETE SET NULL)",
          "CREATE INDEX ON two_b (parent_id)");
      Path config = config(main);

      Cli.Result first = Cli.run("lfk", "generate", "-c", config.toString(), "^two_a$");
      assertThat(first.exitCode()).as(first.err()).isZero();
      Cli.Result second = Cli.run("lfk", "generate", "-c", config.toString(), "^two_b$");
      assertThat(second.exitCode()).as(second.err()).isZero();
      assertThat(second.out().lines().filter(l -> l.contains("two_a")))
          .singleElement()
          .asString()
          .contains("|       Y |");

      List<Path> ups;
      try (Stream<Path> files = Files.list(dir.resolve("db").resolve("migrate"))) {
        ups = files.filter(p -> p.toString().endsWith(".up.sql")).sorted().toList();
      }
      assertThat(ups).hasSize(2);
      for (Path up : ups) {
        TestSql.exec(dbs.dataSource("gen_twice"), Files.readString(up));
      }
      assertThat(
              TestSql.count(
                  dbs.dataSource("gen_twice"),
                  "SELECT count(*) FROM pg_constraint WHERE contype = 'f'"
                      + " AND conrelid::regclass::text IN ('two_a', 'two_b')"))
          .isZero();
      DefinitionCheck.Result checked =
          DefinitionCheck.check(
              DefinitionsFile.read(dir.resolve("lfk.yml")),
              t -> "main",
              n -> dbs.dataSource("gen_twice"));
      assertThat(checked.keys())
          .extracting(k -> k.key().describe())
          .containsExactly(
              "two_a.parent_id → two_parents (async_delete)",
              "two_b.parent_id → two_parents (async_nullify)");
      assertThat(checked.warnings()).isEmpty();
    }
  }

  @Test
  void should_skip_a_key_start_up_would_refuse() throws Exception {
    DatabaseEndpoint main = EmbeddedInfra.get().database("gen_nopk");
    try (Databases dbs = EmbeddedInfra.get().databases("gen_nopk")) {
      TestSql.exec(
          dbs.dataSource("gen_nopk"),
          "DROP TABLE IF EXISTS nopk_items, nopk_logs, nopk_owners, nopk_checked, nopk_typed,"
              + " nopk_parents, nopk_stamped, nopk_moment_uses, nopk_moments, nopk_old_uses,"
              + " nopk_old_2023, nopk_old, nopk_real_uses, nopk_reals CASCADE",
          "DROP DOMAIN IF EXISTS nopk_required, nopk_zoned, nopk_moment",
          "CREATE DOMAIN nopk_moment AS timestamptz",
          "CREATE DOMAIN nopk_zoned AS nopk_moment",
          "CREATE DOMAIN nopk_required AS bigint NOT NULL",
          "CREATE TABLE nopk_parents (id bigint PRIMARY KEY)",
          "CREATE TABLE nopk_items (id bigint PRIMARY KEY,"
              + " parent_id bigint REFERENCES nopk_parents ON DELETE CASCADE)",
          "CREATE INDEX ON nopk_items (parent_id)",
          "CREATE TABLE nopk_logs (parent_id bigint REFERENCES nopk_parents ON DELETE CASCADE)",
          "CREATE INDEX ON nopk_logs (parent_id)",
          // PostgreSQL takes a key setting a NOT NULL column to NULL (each such delete fails).
          "CREATE TABLE nopk_owners (id bigint PRIMARY KEY,"
              + " parent_id bigint NOT NULL REFERENCES nopk_parents ON DELETE SET NULL)",
          "CREATE INDEX ON nopk_owners (parent_id)",
          // The same, kept from NULL by a check constraint, as GitLab adds before NOT NULL.
          "CREATE TABLE nopk_checked (id bigint PRIMARY KEY,"
              + " parent_id bigint REFERENCES nopk_parents ON DELETE SET NULL,"
              + " CONSTRAINT check_parent_id CHECK (parent_id IS NOT NULL) NOT VALID)",
          "CREATE INDEX ON nopk_checked (parent_id)",
          // The same, by its domain.
          "CREATE TABLE nopk_typed (id bigint PRIMARY KEY,"
              + " parent_id nopk_required REFERENCES nopk_parents ON DELETE SET NULL)",
          "CREATE INDEX ON nopk_typed (parent_id)",
          // PostgreSQL compares a timestamp with a timestamptz in the session's zone.
          "CREATE TABLE nopk_moments (at timestamptz PRIMARY KEY)",
          "CREATE TABLE nopk_stamped (id bigint PRIMARY KEY,"
              + " at timestamp REFERENCES nopk_moments ON DELETE CASCADE)",
          "CREATE INDEX ON nopk_stamped (at)",
          // The key's own type under two domains: converted.
          "CREATE TABLE nopk_moment_uses (id bigint PRIMARY KEY,"
              + " at nopk_zoned REFERENCES nopk_moments ON DELETE CASCADE)",
          "CREATE INDEX ON nopk_moment_uses (at)",
          "CREATE TABLE nopk_old (id bigint PRIMARY KEY)",
          "CREATE TABLE nopk_old_2023 () INHERITS (nopk_old)",
          "CREATE TABLE nopk_old_uses (id bigint PRIMARY KEY,"
              + " old_id bigint REFERENCES nopk_old ON DELETE CASCADE)",
          "CREATE INDEX ON nopk_old_uses (old_id)",
          // PostgreSQL compares a double with a real key as doubles: 0.1 with 0.1f, never equal.
          "CREATE TABLE nopk_reals (id real PRIMARY KEY)",
          "CREATE TABLE nopk_real_uses (id bigint PRIMARY KEY,"
              + " real_id double precision REFERENCES nopk_reals ON DELETE CASCADE)",
          "CREATE INDEX ON nopk_real_uses (real_id)");
      Path config = config(main);

      Cli.Result run =
          Cli.run("lfk", "generate", "-c", config.toString(), "^nopk_(parents|moments|old|reals)$");
      assertThat(run.exitCode()).as(run.err()).isZero();
      assertThat(run.out())
          .contains(
              "(nopk_logs.parent_id): the child has no primary key, which cleanup"
                  + " deletes and updates rows by")
          .contains(
              "(nopk_owners.parent_id): ON DELETE SET NULL of a NOT NULL column, which cleanup"
                  + " cannot set to NULL")
          .contains(
              "(nopk_checked.parent_id): ON DELETE SET NULL of a NOT NULL column, which cleanup"
                  + " cannot set to NULL")
          .contains(
              "(nopk_typed.parent_id): ON DELETE SET NULL of a NOT NULL column, which cleanup"
                  + " cannot set to NULL")
          .contains(
              "(nopk_stamped.at): the column and the key are dates or times of two types, which"
                  + " cleanup cannot compare (start-up refuses such a key)")
          .contains(
              "(nopk_real_uses.real_id): the column or the key is floating-point and the other of"
                  + " another type (not an integer column), which cleanup cannot compare (start-up"
                  + " refuses such a key)")
          .contains(
              "(nopk_old_uses.old_id): tables inherit from nopk_old, whose rows' deletes would be"
                  + " captured under their own names (start-up refuses such a key)")
          .contains("Added 2 loose foreign keys to");
      // What was written passes the check 'run' starts with.
      DefinitionCheck.Result checked =
          DefinitionCheck.check(
              DefinitionsFile.read(dir.resolve("lfk.yml")),
              t -> "main",
              n -> dbs.dataSource("gen_nopk"));
      assertThat(checked.keys())
          .extracting(k -> k.key().describe())
          .containsExactlyInAnyOrder(
              "nopk_items.parent_id → nopk_parents (async_delete)",
              "nopk_moment_uses.at → nopk_moments (async_delete)");
      assertThat(Files.readString(migration(".up.sql")))
          .doesNotContain("nopk_logs")
          .doesNotContain("nopk_owners")
          .doesNotContain("nopk_checked")
          .doesNotContain("nopk_typed")
          .doesNotContain("nopk_stamped")
          .doesNotContain("nopk_old");
    }
  }

  @Test
  void should_skip_a_key_found_only_where_tables_places_neither_of_its_tables() throws Exception {
    DatabaseEndpoint main = EmbeddedInfra.get().database("gen_only_main");
    DatabaseEndpoint ci = EmbeddedInfra.get().database("gen_only_ci");
    try (Databases dbs = EmbeddedInfra.get().databases("gen_only_main", "gen_only_ci")) {
      // The tables are in ci alone, and tables: is silent: run would look for them in main.
      TestSql.exec(
          dbs.dataSource("gen_only_ci"),
          "DROP TABLE IF EXISTS only_builds, only_pipelines CASCADE",
          "CREATE TABLE only_pipelines (id bigint PRIMARY KEY)",
          "CREATE TABLE only_builds (id bigint PRIMARY KEY,"
              + " pipeline_id bigint REFERENCES only_pipelines ON DELETE CASCADE)",
          "CREATE INDEX ON only_builds (pipeline_id)");
      Path config = config(main, ci);

      Cli.Result run = Cli.run("lfk", "generate", "-c", config.toString(), "only_");
      assertThat(run.exitCode()).as(run.err()).isZero();
      assertThat(run.out())
          .contains(
              "(only_builds.pipeline_id): found in database ci, but tables: places only_builds in"
                  + " main and only_pipelines in main, where run would capture and clean them; list"
                  + " the tables under tables: first")
          .contains("Nothing to convert.");
      assertThat(dir.resolve("lfk.yml")).doesNotExist();
    }
  }

  @Test
  void should_write_one_definition_for_a_key_two_databases_hold_and_a_migration_for_each()
      throws Exception {
    DatabaseEndpoint main = EmbeddedInfra.get().database("gen_both_main");
    DatabaseEndpoint ci = EmbeddedInfra.get().database("gen_both_ci");
    try (Databases dbs = EmbeddedInfra.get().databases("gen_both_main", "gen_both_ci")) {
      // As GitLab's main and ci databases do, both hold every table.
      for (String db : List.of("gen_both_main", "gen_both_ci")) {
        TestSql.exec(
            dbs.dataSource(db),
            "DROP TABLE IF EXISTS both_builds, both_notes, both_labels, both_projects CASCADE",
            "CREATE TABLE both_projects (id bigint PRIMARY KEY)",
            "CREATE TABLE both_builds (id bigint PRIMARY KEY,"
                + " project_id bigint REFERENCES both_projects ON DELETE CASCADE)",
            "CREATE INDEX ON both_builds (project_id)",
            "CREATE TABLE both_notes (id bigint PRIMARY KEY, project_id bigint"
                + " REFERENCES both_projects ON DELETE "
                + (db.endsWith("main") ? "CASCADE" : "SET NULL")
                + ")",
            // Restricted in ci: a definition made from main's copy would clean what ci refuses.
            "CREATE TABLE both_labels (id bigint PRIMARY KEY, project_id bigint"
                + " REFERENCES both_projects ON DELETE "
                + (db.endsWith("main") ? "CASCADE" : "RESTRICT")
                + ")");
      }
      Path config = config(main, ci);

      Cli.Result dry = Cli.run("lfk", "generate", "-c", config.toString(), "--dry-run", "both_");
      assertThat(dry.exitCode()).as(dry.err()).isZero();
      assertThat(dry.out())
          .contains("Showing foreign keys (6):")
          .contains(
              "both_builds:\n  - table: both_projects\n    column: project_id\n"
                  + "    on_delete: async_delete\nWould write");
      Cli.Result run = Cli.run("lfk", "generate", "-c", config.toString(), "both_");
      assertThat(run.exitCode()).as(run.err()).isZero();
      // One definition cannot take the CASCADE of one database and the SET NULL of the other.
      assertThat(run.out())
          .contains(
              "Skipping 2 (both_notes.project_id): database ci holds the same key as"
                  + " async_nullify, and one loose foreign key takes one action")
          .contains(
              "Skipping 5 (both_notes.project_id): database main holds the same key as"
                  + " async_delete, and one loose foreign key takes one action")
          .containsPattern(
              "Skipping [0-9]+ \\(both_labels.project_id\\): database ci holds the same key as ON"
                  + " DELETE RESTRICT, which has no loose equivalent, and one loose foreign key"
                  + " takes one action")
          .containsPattern(
              "Skipping [0-9]+ \\(both_labels.project_id\\): ON DELETE RESTRICT has no loose"
                  + " equivalent")
          .contains("Added 1 loose foreign key to");
      assertThat(DefinitionsFile.read(dir.resolve("lfk.yml")))
          .extracting(LooseForeignKey::describe)
          .containsExactly("both_builds.project_id → both_projects (async_delete)");

      for (String db : List.of("main", "ci")) {
        Path up = migration("_" + db + "_replace_foreign_keys_with_loose_foreign_keys.up.sql");
        assertThat(Files.readString(up))
            .as("the skipped keys'")
            .doesNotContain("both_notes")
            .doesNotContain("both_labels");
        TestSql.exec(dbs.dataSource("gen_both_" + db), Files.readString(up));
        assertThat(
                TestSql.count(
                    dbs.dataSource("gen_both_" + db),
                    "SELECT count(*) FROM pg_constraint WHERE contype = 'f'"
                        + " AND conrelid = 'both_builds'::regclass"))
            .as(db)
            .isZero();
      }
    }
  }

  @Test
  void should_refuse_a_bad_filter_and_a_missing_definitions_file_setting() throws Exception {
    DatabaseEndpoint main = EmbeddedInfra.get().database("gen_other");
    Path config = dir.resolve("spillway.yml");
    Files.writeString(
        config,
        "databases:\n  main:\n    url: "
            + main.url()
            + "\n    username: "
            + main.username()
            + "\n");
    Cli.Result bad = Cli.run("lfk", "generate", "-c", config.toString(), "(");
    assertThat(bad.exitCode()).isEqualTo(2);
    assertThat(bad.err().strip())
        .isEqualTo(
            "FILTER '(' is not a regular expression: Unclosed group (see 'spillway lfk generate"
                + " --help').");
    try (Databases dbs = EmbeddedInfra.get().databases("gen_other")) {
      TestSql.exec(
          dbs.dataSource("gen_other"),
          "CREATE TABLE IF NOT EXISTS gen_parent (id bigint PRIMARY KEY)",
          "CREATE TABLE IF NOT EXISTS gen_child (id bigint PRIMARY KEY,"
              + " parent_id bigint REFERENCES gen_parent ON DELETE CASCADE)");
    }
    Cli.Result unset = Cli.run("lfk", "generate", "-c", config.toString(), "^gen_child$");
    assertThat(unset.exitCode()).isEqualTo(2);
    assertThat(unset.err()).contains("loose-foreign-keys.file is not set in the configuration");

    // Where the definitions would go without the setting, a file that is not YAML.
    Path usual = Files.createDirectories(dir.resolve("config")).resolve("loose_foreign_keys.yml");
    Files.writeString(usual, "gen_child: [\n");
    Cli.Result broken = Cli.run("lfk", "generate", "-c", config.toString(), "-n", "^gen_child$");
    assertThat(broken.exitCode()).as(broken.err()).isEqualTo(2);
    assertThat(broken.err()).startsWith(usual.toString()).contains("invalid YAML");
    Files.delete(usual);

    // A child whose entries the file holds as a flow list: the file is input, refused as such.
    Path definitions = dir.resolve("lfk.yml");
    String flow = "gen_child: [{table: gen_other, column: other_id, on_delete: async_delete}]\n";
    Files.writeString(definitions, flow);
    Cli.Result flowList = Cli.run("lfk", "generate", "-c", config(main).toString(), "^gen_child$");
    assertThat(flowList.exitCode()).as(flowList.err()).isEqualTo(2);
    assertThat(flowList.err())
        .contains(
            definitions
                + ": the definitions of gen_child (line 1) are not a list of '- table:' entries"
                + " the generator can add to; write them as one; nothing was written.");
    assertThat(definitions).hasContent(flow);
    assertThat(dir.resolve("db")).doesNotExist();
  }

  private Path migration(String suffix) throws Exception {
    try (Stream<Path> files = Files.list(dir.resolve("db").resolve("migrate"))) {
      return files.filter(p -> p.toString().endsWith(suffix)).findFirst().orElseThrow();
    }
  }

  private static long foreignKeys(Databases dbs) {
    return TestSql.count(
        dbs.dataSource("gen_main"),
        "SELECT count(*) FROM pg_constraint WHERE contype = 'f'"
            + " AND conrelid::regclass::text IN ('merge_requests', 'events', 'timeline_events')");
  }
}
