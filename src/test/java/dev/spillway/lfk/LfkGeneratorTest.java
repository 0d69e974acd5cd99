package dev.spillway.lfk;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.spillway.event.TableName;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class LfkGeneratorTest {
  private static ForeignKey fk(String from, String to, String column, String onDelete) {
    return new ForeignKey(
        "main",
        TableName.parse(from),
        TableName.parse(to),
        List.of(column),
        onDelete,
        "no action",
        from + "_" + column + "_fkey",
        "FOREIGN KEY (" + column + ") REFERENCES " + to + "(id) ON DELETE CASCADE",
        List.of("id"),
        true,
        true,
        false,
        null,
        null);
  }

  @Test
  void should_not_write_one_definition_for_copies_of_a_key_that_differ_in_their_update_action() {
    ForeignKey inMain = fk("ci_builds", "ci_pipelines", "pipeline_id", "cascade");
    ForeignKey inCi =
        new ForeignKey(
            "ci",
            inMain.from(),
            inMain.to(),
            inMain.columns(),
            inMain.onDelete(),
            "cascade",
            inMain.name(),
            inMain.definition(),
            inMain.referenced(),
            true,
            true,
            false,
            null,
            null);
    List<LfkGenerator.Row> rows =
        List.of(new LfkGenerator.Row(0, false, inMain), new LfkGenerator.Row(1, false, inCi));

    assertThat(LfkGenerator.skipReason(rows.get(1)))
        .hasValue(
            "ON UPDATE CASCADE changes children when their parent's key changes, which a loose"
                + " foreign key does not do (capture reads deletes only)");
    assertThat(LfkGenerator.conflict(rows.get(0), rows))
        .hasValue(
            "database ci holds the same key with ON UPDATE CASCADE, and one loose foreign key"
                + " serves both or neither");
  }

  /** {@code k} held by {@code database}, referring to {@code to}, its column NOT NULL or not. */
  private static ForeignKey like(
      ForeignKey k, String database, TableName to, boolean columnNotNull) {
    return new ForeignKey(
        database,
        k.from(),
        to,
        k.columns(),
        k.onDelete(),
        k.onUpdate(),
        k.name(),
        k.definition(),
        k.referenced(),
        k.toPrimaryKey(),
        k.childHasPrimaryKey(),
        columnNotNull,
        k.rowSecurity(),
        k.uncleanable());
  }

  private static final List<ForeignKey> KEYS =
      List.of(
          fk("ci_builds", "projects", "project_id", "cascade"),
          fk("events", "projects", "project_id", "cascade"),
          fk("incident_management_timeline_events", "events", "event_id", "nullify"),
          fk("notes", "users", "author_id", "restrict"));

  private final LfkGenerator generator =
      new LfkGenerator(
          KEYS,
          List.of(
              LooseForeignKey.asyncDelete(
                  TableName.parse("ci_builds"),
                  TableName.parse("projects"),
                  "project_id",
                  "lfk.yml:1")));

  @Test
  void should_print_gitlabs_table_with_existing_loose_keys_marked() {
    assertThat(LfkGenerator.table(generator.rows(false, t -> "main")))
        .isEqualTo(
            """
              ID | HAS_LFK |                                FROM |       TO |     COLUMN | ON_DELETE
               0 |       Y |                           ci_builds | projects | project_id |   cascade
               1 |       N |                              events | projects | project_id |   cascade
               2 |       N | incident_management_timeline_events |   events |   event_id |   nullify
               3 |       N |                               notes |    users |  author_id |  restrict
            """);
  }

  @Test
  void should_show_only_keys_across_databases_when_asked() {
    assertThat(generator.rows(true, t -> t.equals("public.ci_builds") ? "ci" : "main"))
        .extracting(r -> r.key().from().table())
        .containsExactly("ci_builds");
  }

  @Test
  void should_match_every_filter_against_from_to_or_column_with_anchors() {
    List<LfkGenerator.Row> rows = generator.rows(false, t -> "main");
    assertThat(LfkGenerator.matching(rows, List.of("events")))
        .extracting(LfkGenerator.Row::id)
        .containsExactly(1, 2);
    assertThat(LfkGenerator.matching(rows, List.of("^events$")))
        .extracting(LfkGenerator.Row::id)
        .containsExactly(1, 2); // TO of row 2 is events too
    assertThat(LfkGenerator.matching(rows, List.of("^events$", "project_id")))
        .extracting(LfkGenerator.Row::id)
        .containsExactly(1);
    assertThat(LfkGenerator.skipReason(rows.get(0))).contains("already a loose foreign key");
    assertThat(LfkGenerator.skipReason(rows.get(3)))
        .contains("ON DELETE RESTRICT has no loose equivalent");
    assertThat(LfkGenerator.skipReason(rows.get(1))).isEmpty();
  }

  @Test
  void should_skip_a_key_found_where_tables_places_neither_of_its_tables() {
    ForeignKey found = fk("ci_builds", "ci_pipelines", "pipeline_id", "cascade");
    ForeignKey inCi = like(found, "ci", found.to(), false);

    assertThat(LfkGenerator.misplaced(row(0, inCi), List.of(row(0, inCi)), t -> "main"))
        .as("neither table under tables:, so both in main")
        .hasValue(
            "found in database ci, but tables: places ci_builds in main and ci_pipelines in main,"
                + " where run would capture and clean them; list the tables under tables: first");
    Map<String, String> placed = Map.of("public.ci_builds", "archive");
    Function<String, String> databaseOf = t -> placed.getOrDefault(t, "main");
    assertThat(LfkGenerator.misplaced(row(1, inCi), List.of(row(1, inCi)), databaseOf))
        .hasValue(
            "found in database ci, but tables: places ci_builds in archive and ci_pipelines in"
                + " main, where run would capture and clean them; list the tables under tables:"
                + " first");
    Map<String, String> decomposed = Map.of("public.ci_builds", "ci");
    ForeignKey between =
        like(
            fk("ci_builds", "projects", "project_id", "cascade"),
            "ci",
            TableName.parse("projects"),
            false);
    assertThat(
            LfkGenerator.misplaced(
                row(2, between), List.of(row(2, between)), t -> decomposed.getOrDefault(t, "main")))
        .as("a key between databases: its child is where it was found")
        .isEmpty();
    assertThat(LfkGenerator.misplaced(row(3, found), List.of(row(3, found)), t -> "main"))
        .isEmpty();
    assertThat(
            LfkGenerator.misplaced(row(4, inCi), List.of(row(3, found), row(4, inCi)), t -> "main"))
        .as("ci's copy of a key main holds too")
        .isEmpty();
  }

  private static LfkGenerator.Row row(int id, ForeignKey k) {
    return new LfkGenerator.Row(id, false, k);
  }

  @Test
  void should_skip_keys_whose_definition_run_would_refuse_or_misread() {
    ForeignKey nullified = fk("merge_requests", "pipelines", "head_pipeline_id", "nullify");
    ForeignKey notNull = like(nullified, "main", nullified.to(), true);
    assertThat(LfkGenerator.skipReason(new LfkGenerator.Row(1, false, nullified))).isEmpty();
    assertThat(LfkGenerator.skipReason(new LfkGenerator.Row(2, false, notNull)))
        .hasValue("ON DELETE SET NULL of a NOT NULL column, which cleanup cannot set to NULL");
    assertThat(
            LfkGenerator.skipReason(
                new LfkGenerator.Row(
                    3, false, fk("order items", "projects", "project_id", "cascade"))))
        .hasValue(
            "order items has a '.' or a space in its name, which the definitions file cannot"
                + " write");
    ForeignKey builds = fk("builds", "projects", "project_id", "cascade");
    // Read back, a.b would be table b of schema a.
    ForeignKey toDotted = like(builds, "main", new TableName("public", "a.b"), false);
    assertThat(LfkGenerator.skipReason(new LfkGenerator.Row(4, false, toDotted)))
        .hasValue("a.b has a '.' or a space in its name, which the definitions file cannot write");
    ForeignKey guarded =
        new ForeignKey(
            "main",
            builds.from(),
            builds.to(),
            builds.columns(),
            builds.onDelete(),
            builds.onUpdate(),
            builds.name(),
            builds.definition(),
            builds.referenced(),
            true,
            true,
            false,
            builds.to(),
            null);
    assertThat(LfkGenerator.skipReason(new LfkGenerator.Row(5, false, guarded)))
        .hasValue(
            "row-level security of projects applies to Spillway's role, which cleanup cannot work"
                + " under (make the role the table's owner, without FORCE ROW LEVEL SECURITY, or"
                + " give it BYPASSRLS)");
  }

  @Test
  void should_add_one_entry_for_a_key_two_databases_hold() {
    ForeignKey main = fk("ci_builds", "projects", "project_id", "cascade");
    ForeignKey ci = like(main, "ci", main.to(), false);
    String entry =
        "ci_builds:\n  - table: projects\n    column: project_id\n    on_delete: async_delete\n";
    assertThat(LfkGenerator.addDefinitions("", List.of(main, ci))).isEqualTo(entry);
    assertThat(LfkGenerator.definitions(List.of(main, ci))).isEqualTo(entry);
  }

  @Test
  void should_add_entries_under_an_existing_child_or_as_a_new_one_keeping_the_rest() {
    String file =
        """
        # our loose foreign keys
        events:
          - table: users
            column: author_id
            on_delete: async_nullify

        # end
        """;
    assertThat(LfkGenerator.addDefinitions(file, List.of(KEYS.get(1), KEYS.get(2))))
        .isEqualTo(
            """
            # our loose foreign keys
            events:
              - table: users
                column: author_id
                on_delete: async_nullify
              - table: projects
                column: project_id
                on_delete: async_delete

            # end
            incident_management_timeline_events:
              - table: events
                column: event_id
                on_delete: async_nullify
            """);
  }

  @Test
  void should_add_under_a_child_key_however_it_is_spelled_commented_or_indented(@TempDir Path dir)
      throws Exception {
    String file =
        """
        public.events: # moved out of main
        - table: users
          column: author_id
          on_delete: async_nullify
          conditions:
            note: |
              kept as written
        notes:
            -   table: issues
                column: noteable_id
                on_delete: async_delete
        """;
    String after =
        LfkGenerator.addDefinitions(
            file, List.of(KEYS.get(1), fk("notes", "projects", "on", "cascade")));
    assertThat(after)
        .isEqualTo(
            """
            public.events: # moved out of main
            - table: users
              column: author_id
              on_delete: async_nullify
              conditions:
                note: |
                  kept as written
            - table: projects
              column: project_id
              on_delete: async_delete
            notes:
                -   table: issues
                    column: noteable_id
                    on_delete: async_delete
                -   table: projects
                    column: 'on'
                    on_delete: async_delete
            """);
    Path written = dir.resolve("lfk.yml");
    Files.writeString(written, after);
    assertThat(DefinitionsFile.read(written))
        .extracting(LooseForeignKey::describe)
        .containsExactly(
            "events.author_id → users (async_nullify)",
            "events.project_id → projects (async_delete)",
            "notes.noteable_id → issues (async_delete)",
            "notes.on → projects (async_delete)");
  }

  @Test
  void should_refuse_to_add_to_a_flow_list_rather_than_break_the_file() {
    assertThatThrownBy(
            () ->
                LfkGenerator.addDefinitions(
                    "# ours\nevents: [{table: users, column: author_id, on_delete: async_delete}]\n",
                    List.of(KEYS.get(1))))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage(
            "the definitions of events (line 2) are not a list of '- table:' entries the"
                + " generator can add to; write them as one");
  }

  @Test
  void should_refuse_to_add_to_a_list_another_shares_through_an_anchor() {
    String shared =
        "merge_requests: &mr\n  - table: projects\n    column: project_id\n"
            + "    on_delete: async_delete\nevents: *mr\n";
    assertThatThrownBy(() -> LfkGenerator.addDefinitions(shared, List.of(KEYS.get(1))))
        .as("added to events, merge_requests would gain it too")
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage(
            "the definitions of events (line 5) are or hold a YAML anchor or alias (&, *), which"
                + " another table's list may share; write them out");
    String entryShared =
        "events:\n  - &p\n    table: projects\n    column: project_id\n"
            + "    on_delete: async_delete\nnotes:\n  - *p\n";
    assertThatThrownBy(() -> LfkGenerator.addDefinitions(entryShared, List.of(KEYS.get(1))))
        .as("an entry another list shares")
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageStartingWith("the definitions of events (line 1) are or hold a YAML anchor");
  }

  @Test
  void should_write_a_migration_that_drops_and_a_down_that_restores() {
    assertThat(LfkGenerator.up(List.of(KEYS.get(1))))
        .contains(
            "ALTER TABLE \"public\".\"events\" DROP CONSTRAINT IF EXISTS"
                + " \"events_project_id_fkey\";");
    assertThat(LfkGenerator.down(List.of(KEYS.get(1))))
        .contains(
            "ALTER TABLE \"public\".\"events\" ADD CONSTRAINT \"events_project_id_fkey\" FOREIGN"
                + " KEY (project_id) REFERENCES projects(id) ON DELETE CASCADE;");
  }
}
