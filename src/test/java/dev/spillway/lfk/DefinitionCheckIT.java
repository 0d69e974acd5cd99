package dev.spillway.lfk;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.tuple;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.spillway.config.ConfigException;
import dev.spillway.jdbc.Databases;
import dev.spillway.testing.EmbeddedInfra;
import dev.spillway.testing.TestSql;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Definitions checked against real catalogs in two databases. */
class DefinitionCheckIT {
  private static Databases dbs;
  @TempDir Path dir;

  @BeforeAll
  static void schema() {
    dbs = EmbeddedInfra.get().databases("chk_main", "chk_ci");
    TestSql.exec(
        dbs.dataSource("chk_main"),
        "DROP SCHEMA IF EXISTS k CASCADE",
        "CREATE SCHEMA k",
        "CREATE TABLE k.projects (id bigint PRIMARY KEY)",
        "CREATE TABLE k.tenants (a int, b int, PRIMARY KEY (a, b))",
        "CREATE TABLE k.p_builds (partition_id int, id bigint, PRIMARY KEY (partition_id, id))"
            + " PARTITION BY LIST (partition_id)",
        "CREATE TABLE k.p_builds_100 PARTITION OF k.p_builds FOR VALUES IN (100)",
        "CREATE TABLE k.build_uses (id bigint PRIMARY KEY, build_id bigint)",
        "CREATE TABLE k.p_jobs (partition_id int, id bigint, PRIMARY KEY (id, partition_id))"
            + " PARTITION BY LIST (partition_id)",
        "CREATE TABLE k.job_uses (id bigint PRIMARY KEY, job_id bigint)",
        "CREATE INDEX ON k.job_uses (job_id)",
        "CREATE TABLE k.tenant_items (tenant_id int, id bigint, PRIMARY KEY (tenant_id, id))",
        "CREATE INDEX ON k.build_uses (build_id)",
        "CREATE TABLE k.logs (project_id bigint)",
        "CREATE TABLE k.events (id bigint PRIMARY KEY) PARTITION BY RANGE (id)",
        "CREATE TABLE k.merge_requests (id bigint PRIMARY KEY, project_id bigint, state int)",
        "CREATE INDEX ON k.merge_requests (project_id)",
        "CREATE TABLE k.packages (id bigint PRIMARY KEY, project_id bigint, status int)",
        "CREATE TABLE k.prüfungsergebnisse_für_überfällige_lieferungen"
            + " (id bigint PRIMARY KEY, project_id bigint)",
        "CREATE TABLE k.approvals (id bigint PRIMARY KEY, project_id bigint NOT NULL)",
        "CREATE INDEX ON k.approvals (project_id)",
        "CREATE TABLE k.releases (id bigint PRIMARY KEY, project_id bigint)",
        "INSERT INTO k.releases VALUES (1, 7), (2, 7)",
        "CREATE DOMAIN k.amount AS numeric(5,2)",
        "CREATE TABLE k.labels (id bigint PRIMARY KEY, project_id bigint, code varchar(3),"
            + " grade char(3), flags bit(3), score numeric(5,2), seen timestamp(0),"
            + " amount k.amount)",
        "CREATE INDEX ON k.labels (project_id)",
        "CREATE TABLE k.codes (code char(3) PRIMARY KEY)",
        "CREATE TABLE k.code_uses (id bigint PRIMARY KEY, code char(3))",
        "CREATE INDEX ON k.code_uses (code)",
        "CREATE TABLE k.padded_uses (id bigint PRIMARY KEY, tag char(5))",
        "CREATE INDEX ON k.padded_uses (tag)",
        "CREATE TABLE k.tags (name text PRIMARY KEY)",
        "CREATE TABLE k.tag_uses (id bigint PRIMARY KEY, tag bigint)",
        "CREATE INDEX ON k.tag_uses (tag)",
        "CREATE TABLE k.hashed (id bigint PRIMARY KEY, project_id bigint)",
        "CREATE INDEX ON k.hashed USING hash (project_id)",
        "CREATE TABLE k.partial (id bigint PRIMARY KEY, project_id bigint)",
        "CREATE TABLE k.uuid_uses (id bigint PRIMARY KEY, project_id uuid)",
        "CREATE DOMAIN k.required_id AS bigint NOT NULL",
        "CREATE DOMAIN k.checked_id AS bigint CHECK (VALUE IS NOT NULL)",
        "CREATE DOMAIN k.over_checked_id AS k.checked_id",
        "CREATE TABLE k.domained (id bigint PRIMARY KEY, project_id k.required_id,"
            + " other_id k.over_checked_id)",
        "CREATE TABLE k.checked (id bigint PRIMARY KEY, project_id bigint,"
            + " CONSTRAINT check_project_id_not_null CHECK (project_id IS NOT NULL) NOT VALID)",
        "CREATE TABLE k.computed (id bigint PRIMARY KEY, project_id bigint,"
            + " half bigint GENERATED ALWAYS AS (project_id / 2) STORED,"
            + " serial bigint GENERATED ALWAYS AS IDENTITY)",
        "CREATE TABLE k.things (id uuid PRIMARY KEY)",
        "CREATE TABLE k.stamps (at timestamptz PRIMARY KEY)",
        "CREATE TABLE k.stamp_texts (id bigint PRIMARY KEY, at text)",
        "CREATE TABLE k.reals (id real PRIMARY KEY)",
        "CREATE TABLE k.real_uses (id bigint PRIMARY KEY, real_id double precision,"
            + " same_id real, whole_id bigint)",
        "CREATE TABLE k.float_uses (id bigint PRIMARY KEY, project_id double precision)",
        "CREATE TYPE k.mood AS ENUM ('calm', 'busy')",
        "CREATE TYPE k.other_mood AS ENUM ('calm', 'busy')",
        "CREATE TABLE k.moods (name k.mood PRIMARY KEY)",
        "CREATE TABLE k.mood_uses (id bigint PRIMARY KEY, mood k.other_mood)",
        "CREATE TABLE k.tag_names (id bigint PRIMARY KEY, tag name, project_id name)",
        "CREATE TABLE k.stamp_uses (id bigint PRIMARY KEY, at timestamp(3), day date,"
            + " zoned timestamptz(3), payload json, doc jsonb)",
        "CREATE TABLE k.old_events (id bigint PRIMARY KEY)",
        "CREATE TABLE k.old_events_2023 () INHERITS (k.old_events)",
        "CREATE TABLE k.old_event_uses (id bigint PRIMARY KEY, event_id bigint)",
        "CREATE TABLE k.thing_uses (id bigint PRIMARY KEY, thing_id bigint)",
        "CREATE TABLE k.thing_bytes (id bigint PRIMARY KEY, thing_id bytea)",
        "CREATE DOMAIN k.small_status AS int CHECK (VALUE BETWEEN 0 AND 3)",
        "CREATE TABLE k.statused (id bigint PRIMARY KEY, project_id bigint, status k.small_status)",
        "CREATE DOMAIN k.int_id AS integer",
        "CREATE DOMAIN k.big_id AS bigint",
        "CREATE TABLE k.domain_uses (id bigint PRIMARY KEY, project_id k.int_id,"
            + " big_project_id k.big_id)",
        "CREATE INDEX ON k.domain_uses (project_id)",
        "CREATE INDEX ON k.domain_uses (big_project_id)",
        "CREATE INDEX ON k.partial (project_id) WHERE project_id > 0",
        // GitLab's kind of partial index: every statement's condition implies its predicate.
        "CREATE TABLE k.not_null_partial (id bigint PRIMARY KEY, \"Project\" bigint)",
        "CREATE INDEX ON k.not_null_partial (\"Project\") WHERE \"Project\" IS NOT NULL",
        // Indexes the planner passes over for the statements' = ANY and ORDER BY.
        "CREATE TABLE k.patterned (id bigint PRIMARY KEY, project_id text)",
        "CREATE INDEX ON k.patterned (project_id text_pattern_ops)",
        "CREATE TABLE k.collated (id bigint PRIMARY KEY, project_id text COLLATE \"POSIX\")",
        "CREATE INDEX ON k.collated (project_id COLLATE \"C\")",
        "CREATE TABLE k.plain_text (id bigint PRIMARY KEY, project_id varchar(20))",
        "CREATE INDEX ON k.plain_text (project_id)");
    // A concurrent build that fails leaves an index PostgreSQL keeps but never uses.
    assertThatThrownBy(
            () ->
                TestSql.exec(
                    dbs.dataSource("chk_main"),
                    "CREATE UNIQUE INDEX CONCURRENTLY releases_project_id"
                        + " ON k.releases (project_id)"))
        .hasStackTraceContaining("could not create unique index");
    assertThat(
            TestSql.count(
                dbs.dataSource("chk_main"),
                "SELECT count(*) FROM pg_index WHERE NOT indisvalid"
                    + " AND indrelid = 'k.releases'::regclass"))
        .isOne();
    TestSql.exec(
        dbs.dataSource("chk_ci"),
        "DROP SCHEMA IF EXISTS k CASCADE",
        "CREATE SCHEMA k",
        "CREATE TABLE k.ci_builds (id bigint, partition_id int, project_id varchar(64),"
            + " PRIMARY KEY (id, partition_id)) PARTITION BY LIST (partition_id)",
        "CREATE INDEX ON k.ci_builds (project_id)");
  }

  @AfterAll
  static void close() {
    dbs.close();
  }

  private DefinitionCheck.Result check(String yaml) throws Exception {
    Path file = dir.resolve("lfk.yml");
    Files.writeString(file, yaml);
    Map<String, String> where = Map.of("k.ci_builds", "ci", "k.ci_remote_labels", "ci");
    return DefinitionCheck.check(
        DefinitionsFile.read(file),
        t -> where.getOrDefault(t, "main"),
        name -> dbs.dataSource(name.equals("ci") ? "chk_ci" : "chk_main"));
  }

  private String error(String yaml) {
    return assertThatThrownBy(() -> check(yaml))
        .isInstanceOf(ConfigException.class)
        .actual()
        .getMessage()
        .replace(dir.resolve("lfk.yml").toString(), "lfk.yml");
  }

  private static String entry(String child, String parent, String column, String action) {
    return "k."
        + child
        + ":\n  - table: k."
        + parent
        + "\n    column: "
        + column
        + "\n    on_delete: "
        + action
        + "\n";
  }

  @Test
  void should_check_tables_across_databases_and_describe_the_keys() throws Exception {
    DefinitionCheck.Result r =
        check(
            entry("merge_requests", "projects", "project_id", "async_delete")
                + entry("ci_builds", "projects", "project_id", "async_delete")
                + entry("merge_requests", "events", "project_id", "async_nullify").substring(18));
    assertThat(r.keys()).hasSize(3);
    CheckedKey builds = r.keys().get(1);
    assertThat(builds.childDatabase()).isEqualTo("ci");
    assertThat(builds.parentDatabase()).isEqualTo("main");
    assertThat(builds.childPrimaryKey()).containsExactly("id", "partition_id");
    assertThat(builds.columnType()).as("no modifier to cut ids").isEqualTo("character varying");
    assertThat(builds.parentPrimaryKey()).isEqualTo("id");
    assertThat(builds.parentKeyType()).isEqualTo("bigint");
    assertThat(builds.unsweepable()).as("a child's text against any key").isEmpty();
    assertThat(r.keys().get(0).unsweepable()).as("merge_requests (project_id)").isEmpty();
    assertThat(r.warnings()).isEmpty();
  }

  @Test
  void should_take_the_id_of_a_parent_whose_primary_key_has_several_columns() throws Exception {
    DefinitionCheck.Result r = check(entry("build_uses", "p_builds", "build_id", "async_delete"));

    CheckedKey uses = r.keys().get(0);
    assertThat(uses.parentPrimaryKey()).isEqualTo("id");
    assertThat(uses.parentKeyType()).isEqualTo("bigint");
    assertThat(uses.unsweepable()).isEmpty();
    // Its key starts with partition_id: no index serves a look-up by id alone.
    assertThat(r.warnings())
        .singleElement()
        .asString()
        .startsWith(
            "k.build_uses.build_id → k.p_builds (async_delete): no index on k.p_builds starts with"
                + " id, by which cleanup looks up deleted parents, so each look-up scans every"
                + " partition; add one: CREATE INDEX ON \"k\".\"p_builds\" (\"id\");");
    assertThat(
            check(
                    entry("build_uses", "p_builds", "build_id", "async_delete")
                        + entry("job_uses", "p_builds", "job_id", "async_delete"))
                .warnings())
        .as("once for the parent")
        .hasSize(1);

    assertThat(check(entry("job_uses", "p_jobs", "job_id", "async_delete")).warnings())
        .as("GitLab's order, (id, partition_id): its key's index serves")
        .isEmpty();

    TestSql.exec(dbs.dataSource("chk_main"), "CREATE INDEX ON k.p_builds (id)");
    try {
      assertThat(check(entry("build_uses", "p_builds", "build_id", "async_delete")).warnings())
          .isEmpty();
    } finally {
      TestSql.exec(dbs.dataSource("chk_main"), "DROP INDEX k.p_builds_id_idx");
    }
  }

  @Test
  void should_say_which_keys_the_sweep_cannot_read_or_compare() throws Exception {
    DefinitionCheck.Result r =
        check(
            entry("code_uses", "codes", "code", "async_delete")
                + entry("tag_uses", "tags", "tag", "async_delete")
                + entry("hashed", "projects", "project_id", "async_delete")
                + entry("partial", "projects", "project_id", "async_delete")
                + entry("padded_uses", "tags", "tag", "async_delete")
                + entry("not_null_partial", "projects", "Project", "async_delete"));
    // char(3) compared as char(1) would cut every key to its first letter.
    assertThat(r.keys().get(0).parentKeyType()).isEqualTo("bpchar");
    assertThat(r.keys().get(0).unsweepable()).isEmpty();
    assertThat(r.keys().get(1).unsweepable())
        .hasValue(
            "tag is bigint and the parent's key text: the sweep compares only the same types,"
                + " integers, or a child's text");
    assertThat(r.keys().get(2).unsweepable()).as("a hash index").isPresent();
    assertThat(r.keys().get(3).unsweepable()).as("a partial index").isPresent();
    assertThat(r.keys().get(4).unsweepable())
        .as("a padded child's text is not the text key it was padded from")
        .hasValue(
            "tag is bpchar and the parent's key text: the sweep compares only the same types,"
                + " integers, or a child's text");
    assertThat(r.keys().get(5).unsweepable())
        .as("an index of the rows whose column is not null")
        .isEmpty();
    assertThat(r.warnings())
        .as("hashed and partial; not the one of non-null rows")
        .hasSize(2)
        .noneMatch(w -> w.contains("not_null_partial"));
  }

  @Test
  void should_warn_about_a_missing_index_with_the_statement_that_adds_it() throws Exception {
    DefinitionCheck.Result r =
        check(
            "k.packages:\n  - table: k.projects\n    column: project_id\n"
                + "    on_delete: update_column_to\n    target_column: status\n    target_value: 4\n");
    assertThat(r.warnings())
        .containsExactly(
            "k.packages.project_id → k.projects (update_column_to): no index on k.packages starts"
                + " with project_id, status, so cleanup scans the table; add one: CREATE INDEX"
                + " CONCURRENTLY \"index_packages_on_project_id_and_status\" ON \"k\".\"packages\""
                + " (\"project_id\", \"status\");");
    assertThat(r.keys().get(0).unsweepable())
        .hasValue("no index starts with project_id (add one, as the warning says)");
  }

  @Test
  void should_name_the_index_it_advises_as_postgresql_keeps_the_name() throws Exception {
    String child = "prüfungsergebnisse_für_überfällige_lieferungen";
    DefinitionCheck.Result r = check(entry(child, "projects", "project_id", "async_delete"));
    String warning = r.warnings().get(0);
    String statement = warning.substring(warning.indexOf("CREATE INDEX"));
    // index_<child>_on_project_id is 70 bytes in 66 characters: cut to 63 bytes, not characters.
    String name = "index_prüfungsergebnisse_für_überfällige_lieferungen_on_pro";
    assertThat(statement).contains("\"" + name + "\"");

    TestSql.exec(dbs.dataSource("chk_main"), statement);
    try {
      assertThat(
              TestSql.text(
                  dbs.dataSource("chk_main"),
                  "SELECT string_agg(indexname, ', ') FROM pg_indexes WHERE schemaname = 'k'"
                      + " AND tablename = '"
                      + child
                      + "' AND indexname <> '"
                      + child
                      + "_pkey'"))
          .as("the index made under the name the warning gives")
          .isEqualTo(name);
    } finally {
      TestSql.exec(dbs.dataSource("chk_main"), "DROP INDEX k.\"" + name + "\"");
    }
  }

  @Test
  void should_not_count_an_index_of_another_collation_nor_sweep_by_another_operator_class()
      throws Exception {
    DefinitionCheck.Result r =
        check(
            entry("patterned", "projects", "project_id", "async_delete")
                + entry("collated", "projects", "project_id", "async_delete")
                + entry("plain_text", "projects", "project_id", "async_delete"));
    // The planner takes text_pattern_ops for cleanup's =, and no other collation's index.
    assertThat(r.warnings())
        .singleElement()
        .asString()
        .contains("no index on k.collated starts with project_id");
    assertThat(r.keys())
        .extracting(k -> k.key().child().table(), k -> k.unsweepable().orElse("swept"))
        .containsExactly(
            tuple(
                "patterned",
                "no index of project_id's default operator class starts with it (one of another,"
                    + " as text_pattern_ops, serves cleanup's equality but not the sweep's walk in"
                    + " order)"),
            tuple("collated", "no index starts with project_id (add one, as the warning says)"),
            // varchar's index takes text's default operator class, as the planner does.
            tuple("plain_text", "swept"));
  }

  @Test
  void should_not_count_an_invalid_index_as_one() throws Exception {
    DefinitionCheck.Result r = check(entry("releases", "projects", "project_id", "async_delete"));
    assertThat(r.warnings())
        .singleElement()
        .asString()
        .endsWith(
            "add one: CREATE INDEX CONCURRENTLY \"index_releases_on_project_id\""
                + " ON \"k\".\"releases\" (\"project_id\");");
  }

  @Test
  void should_read_keys_as_the_type_under_a_columns_domains() throws Exception {
    DefinitionCheck.Result r =
        check(
            entry("domain_uses", "projects", "project_id", "async_delete")
                + "  - table: k.projects\n    column: big_project_id\n"
                + "    on_delete: async_delete\n");
    CheckedKey ints = r.keys().get(0);
    assertThat(ints.columnType()).isEqualTo("integer");
    assertThat(ints.asColumnValue("3000000000"))
        .as("a bigint key past an integer domain's range: no child has it")
        .isEmpty();
    assertThat(ints.asColumnValue("42")).hasValue("42");
    assertThat(r.keys().get(1).columnType()).isEqualTo("bigint");
    assertThat(r.keys().get(1).unsweepable()).as("a bigint domain against a bigint key").isEmpty();
    assertThat(r.warnings()).isEmpty();
  }

  @Test
  void should_accept_values_the_columns_take() throws Exception {
    DefinitionCheck.Result r =
        check(
            entry("merge_requests", "projects", "project_id", "async_delete")
                + "    conditions: { state: 3 }\n"
                + entry("packages", "projects", "project_id", "update_column_to")
                + "    target_column: status\n    target_value: '4'\n"
                + entry("statused", "projects", "project_id", "update_column_to")
                + "    target_column: status\n    target_value: null\n"
                + entry("labels", "projects", "project_id", "update_column_to")
                + "    target_column: code\n    target_value: abc\n"
                + "    conditions: { grade: ab, flags: '101', score: 1.2, amount: 1.2,"
                + " seen: '2026-01-02 03:04:05' }\n");
    assertThat(r.keys()).as("'ab' padded to char(3), 1.2 as 1.20").hasSize(4);
    assertThat(r.keys().get(2).key().targetValue()).isNull();
  }

  @Test
  void should_refuse_values_their_columns_modifier_would_cut_or_round() {
    String labels = entry("labels", "projects", "project_id", "update_column_to");
    // Cleanup's UPDATE would fail on every batch: the value is too long for varchar(3).
    assertThat(error(labels + "    target_column: code\n    target_value: abcd\n"))
        .isEqualTo(
            "lfk.yml:2: k.labels.project_id → k.projects (update_column_to) has target_value"
                + " 'abcd', which column code of type character varying(3) cannot hold unchanged"
                + " (its type makes it 'abc').");
    // Written without its spaces, it would differ from the value still, and be written again.
    assertThat(error(labels + "    target_column: code\n    target_value: 'abc  '\n"))
        .endsWith(
            "column code of type character varying(3) cannot hold unchanged (its type makes it"
                + " 'abc').");
    assertThat(error(labels + "    target_column: score\n    target_value: 1.234\n"))
        .endsWith(
            "column score of type numeric(5,2) cannot hold unchanged (its type makes it '1.23').");
    // A domain keeps its modifier to itself: the column's own type has none.
    assertThat(error(labels + "    target_column: amount\n    target_value: 1.234\n"))
        .endsWith(
            "column amount of type k.amount cannot hold unchanged (its type makes it '1.23').");
    assertThat(
            error(labels + "    target_column: seen\n    target_value: '2026-01-02 03:04:05.6'\n"))
        .endsWith("(its type makes it '2026-01-02 03:04:06').");
    // A condition the column's values never equal: no child would ever be cleaned.
    String delete = entry("labels", "projects", "project_id", "async_delete");
    assertThat(error(delete + "    conditions: { grade: abcd }\n"))
        .isEqualTo(
            "lfk.yml:2: k.labels.project_id → k.projects (async_delete) has condition grade ="
                + " 'abcd', which column grade of type character(3) cannot hold unchanged (its type"
                + " makes it 'abc').");
    assertThat(error(delete + "    conditions: { flags: '1010' }\n"))
        .endsWith("column flags of type bit(3) cannot hold unchanged (its type makes it '101').");
    assertThat(error(delete + "    conditions: { flags: '10' }\n"))
        .endsWith("column flags of type bit(3) cannot hold unchanged (its type makes it '100').");
  }

  @Test
  void should_refuse_values_and_nulls_the_columns_do_not_take() {
    assertThat(error(entry("approvals", "projects", "project_id", "async_nullify")))
        .isEqualTo(
            "lfk.yml:2: k.approvals.project_id → k.projects (async_nullify) sets project_id to"
                + " NULL, but k.approvals.project_id is declared NOT NULL.");
    assertThat(
            error(
                entry("merge_requests", "projects", "project_id", "async_delete")
                    + "    conditions:\n      - column: state\n        value: opened\n"))
        .isEqualTo(
            "lfk.yml:2: k.merge_requests.project_id → k.projects (async_delete) has condition"
                + " state = 'opened', which column state of type integer does not accept.");
    assertThat(
            error(
                entry("packages", "projects", "project_id", "update_column_to")
                    + "    target_column: status\n    target_value: 99999999999\n"))
        .endsWith(
            "has target_value '99999999999', which column status of type integer does not"
                + " accept.");
    assertThat(error(entry("checked", "projects", "project_id", "async_nullify")))
        .endsWith(
            "sets project_id to NULL, but a check constraint keeps k.checked.project_id from"
                + " NULL.");
    assertThat(error(entry("domained", "projects", "project_id", "async_nullify")))
        .endsWith(
            "sets project_id to NULL, but k.domained.project_id is of domain k.required_id, which"
                + " takes no NULL.");
    assertThat(
            error(
                entry("domained", "projects", "other_id", "update_column_to")
                    + "    target_column: project_id\n    target_value: null\n"))
        .endsWith(
            "sets project_id to NULL, but k.domained.project_id is of domain k.required_id, which"
                + " takes no NULL.");
    assertThat(
            error(
                entry("statused", "projects", "project_id", "update_column_to")
                    + "    target_column: status\n    target_value: 4\n"))
        .isEqualTo(
            "lfk.yml:2: k.statused.project_id → k.projects (update_column_to) has target_value"
                + " '4', which column status of type k.small_status does not accept.");
    assertThat(error(entry("domained", "projects", "other_id", "async_nullify")))
        .endsWith(
            "sets other_id to NULL, but k.domained.other_id is of domain k.checked_id, which takes"
                + " no NULL.");
    assertThat(
            error(
                entry("computed", "projects", "project_id", "update_column_to")
                    + "    target_column: half\n    target_value: 1\n"))
        .endsWith("sets half, but k.computed.half is a generated column.");
    assertThat(
            error(
                entry("computed", "projects", "project_id", "update_column_to")
                    + "    target_column: serial\n    target_value: 1\n"))
        .endsWith("sets serial, but k.computed.serial is an identity column GENERATED ALWAYS.");
  }

  @Test
  void should_name_the_entry_whose_table_lands_in_an_unconfigured_database() throws Exception {
    Path file = dir.resolve("lfk.yml");
    Files.writeString(file, entry("merge_requests", "projects", "project_id", "async_delete"));
    // The real pool registry: only chk_main and chk_ci exist, so main (the default) does not.
    assertThatThrownBy(
            () -> DefinitionCheck.check(DefinitionsFile.read(file), t -> "main", dbs::dataSource))
        .isInstanceOf(ConfigException.class)
        .hasMessage(
            file
                + ":2: k.merge_requests.project_id → k.projects (async_delete) needs database"
                + " main, which is not configured (list the table under tables: with its"
                + " database).");
  }

  @Test
  void should_refuse_each_definition_the_catalog_contradicts() {
    assertThat(error(entry("merge_requests", "nope", "project_id", "async_delete")))
        .isEqualTo(
            "lfk.yml:2: k.merge_requests.project_id → k.nope (async_delete) names parent table"
                + " k.nope, which does not exist in database main.");
    assertThat(error(entry("merge_requests", "tenants", "project_id", "async_delete")))
        .endsWith(
            "needs a parent with a one-column primary key, or a partitioned one whose key holds an"
                + " id column (as GitLab's partitioned tables' id, partition_id), but k.tenants"
                + " has a, b.");
    assertThat(error(entry("merge_requests", "logs", "project_id", "async_delete")))
        .endsWith(
            "needs a parent with a one-column primary key, or a partitioned one whose key holds an"
                + " id column (as GitLab's partitioned tables' id, partition_id), but k.logs has"
                + " none.");
    // Ids may repeat per tenant in a plain table's key: a deleted one another tenant still holds
    // would leave its children for good.
    assertThat(error(entry("merge_requests", "tenant_items", "project_id", "async_delete")))
        .endsWith("but k.tenant_items has tenant_id, id and is not partitioned.");
    assertThat(error(entry("nope", "projects", "project_id", "async_delete")))
        .endsWith("names child table k.nope, which does not exist in database main.");
    assertThat(error(entry("logs", "projects", "project_id", "async_delete")))
        .endsWith("needs a child with a primary key, but k.logs has none.");
    assertThat(error(entry("merge_requests", "projects", "projectid", "async_delete")))
        .endsWith("names column projectid, which k.merge_requests does not have.");
    assertThat(
            error(
                entry("merge_requests", "projects", "project_id", "update_column_to")
                    + "    target_column: status\n    target_value: 4\n"))
        .endsWith("names column status, which k.merge_requests does not have.");
    assertThat(
            error(
                entry("merge_requests", "projects", "project_id", "async_delete")
                    + "    conditions: { archived: true }\n"))
        .endsWith("names column archived, which k.merge_requests does not have.");
    assertThat(error(entry("uuid_uses", "projects", "project_id", "async_delete")))
        .endsWith(
            "project_id is uuid and the parent's key bigint, which cleanup cannot compare (it"
                + " reads each deleted key as uuid): give the column the key's kind of type, an"
                + " integer one for a text key, or text.");
    assertThat(error(entry("thing_uses", "things", "thing_id", "async_delete")))
        .endsWith(
            "thing_id is bigint and the parent's key uuid, which cleanup cannot compare (it"
                + " reads each deleted key as bigint): give the column the key's own type, or"
                + " text.");
    assertThat(error(entry("thing_bytes", "things", "thing_id", "async_delete")))
        .as("of one catch-all category, but bytea reads a uuid's text as other bytes")
        .endsWith(
            "thing_id is bytea and the parent's key uuid, which cleanup cannot compare (it"
                + " reads each deleted key as bytea): give the column the key's own type, or"
                + " text.");
  }

  @Test
  void should_refuse_a_date_or_time_child_of_a_key_of_another_date_or_time_type() throws Exception {
    // Cast to timestamp, a key's 10:00Z is 10:00 whatever zone the rows were written in; cast to
    // date, a key is its day: cleanup would take children of live parents.
    assertThat(error(entry("stamp_uses", "stamps", "at", "async_delete")))
        .endsWith(
            "at is timestamp without time zone and the parent's key timestamp with time zone,"
                + " which cleanup cannot compare (it reads each deleted key as timestamp without"
                + " time zone): give the column the key's own type.");
    assertThat(error(entry("stamp_uses", "stamps", "day", "async_delete")))
        .endsWith(
            "day is date and the parent's key timestamp with time zone, which cleanup cannot"
                + " compare (it reads each deleted key as date): give the column the key's own"
                + " type.");
    assertThat(check(entry("stamp_uses", "stamps", "zoned", "async_delete")).keys())
        .as("the key's own type, another precision")
        .hasSize(1);
  }

  @Test
  void should_refuse_a_child_whose_type_would_clean_other_keys_children_or_none() throws Exception {
    // A double reads a real key 0.1 as 0.1, which its 0.10000000149011612 is not.
    assertThat(error(entry("real_uses", "reals", "real_id", "async_delete")))
        .endsWith(
            "real_id is double precision and the parent's key real, which cleanup cannot compare"
                + " (it reads each deleted key as double precision): give the column the key's"
                + " own type, or an integer one.");
    assertThat(check(entry("real_uses", "reals", "same_id", "async_delete")).keys()).hasSize(1);
    assertThat(check(entry("real_uses", "reals", "whole_id", "async_delete")).keys()).hasSize(1);
    // Past 2^53, bigints round onto their neighbours' values.
    assertThat(error(entry("float_uses", "projects", "project_id", "async_delete")))
        .endsWith(
            "project_id is double precision and the parent's key bigint, which cleanup cannot"
                + " compare (it reads each deleted key as double precision): give the column the"
                + " key's own type.");
    // Capture writes a timestamptz key 2026-01-01T10:00:00Z, which no text PostgreSQL wrote is.
    assertThat(error(entry("stamp_texts", "stamps", "at", "async_delete")))
        .endsWith(
            "at is text and the parent's key timestamp with time zone, which cleanup cannot"
                + " compare (it reads each deleted key as text): give the column the key's own"
                + " type.");
    // A string type of its own (name here, citext likewise) compares otherwise than text.
    assertThat(error(entry("tag_names", "tags", "tag", "async_delete")))
        .endsWith(
            "tag is name and the parent's key text, which cleanup cannot compare (it reads each"
                + " deleted key as name): give the column the key's kind of type, an integer one"
                + " for a text key, or text.");
    assertThat(check(entry("tag_names", "projects", "project_id", "async_delete")).keys())
        .as("of a key that is no string, as text")
        .hasSize(1);
    assertThat(error(entry("mood_uses", "moods", "mood", "async_delete")))
        .endsWith(
            "mood is k.other_mood and the parent's key k.mood, which cleanup cannot compare (it"
                + " reads each deleted key as k.other_mood): give the column the key's own type.");
  }

  @Test
  void should_refuse_a_child_whose_collation_takes_other_keys_for_the_deleted_one()
      throws Exception {
    DataSource main = dbs.dataSource("chk_main");
    try {
      TestSql.exec(
          main,
          "CREATE COLLATION IF NOT EXISTS k.ci"
              + " (provider = icu, locale = 'und-u-ks-level2', deterministic = false)");
    } catch (RuntimeException noIcu) {
      assumeTrue(false, "a server without ICU: " + noIcu.getMessage());
    }
    TestSql.exec(
        main,
        "CREATE TABLE IF NOT EXISTS k.ci_labels (id bigint PRIMARY KEY, tag text COLLATE k.ci)",
        "CREATE TABLE IF NOT EXISTS k.ci_tags (name text COLLATE k.ci PRIMARY KEY)");
    // With 'ABC' live and 'abc' deleted, tag = 'abc' would delete the labels of 'ABC' too.
    assertThat(error(entry("ci_labels", "tags", "tag", "async_delete")))
        .endsWith(
            "tag compares by collation k.ci, which is not deterministic, and the parent's key by"
                + " \"default\": cleanup would take the children of keys that differ but compare"
                + " equal ('ABC' and 'abc'); give the column the key's collation.");
    assertThat(check(entry("ci_labels", "ci_tags", "tag", "async_delete")).keys())
        .as("a key of the same collation: no two keys compare equal")
        .hasSize(1);
    // Of the same name in another database, it may be another collation.
    DataSource ci = dbs.dataSource("chk_ci");
    TestSql.exec(
        ci,
        "CREATE COLLATION IF NOT EXISTS k.ci"
            + " (provider = icu, locale = 'und-u-ks-level2', deterministic = false)",
        "CREATE TABLE IF NOT EXISTS k.ci_remote_labels (id bigint PRIMARY KEY,"
            + " tag text COLLATE k.ci)");
    assertThat(error(entry("ci_remote_labels", "ci_tags", "tag", "async_delete")))
        .contains(
            "tag compares by collation k.ci, which is not deterministic, and the parent's key is"
                + " in another database, whose collation of any name may compare otherwise");
  }

  @Test
  void should_refuse_a_value_compared_with_a_column_whose_type_has_no_equality() {
    assertThat(
            error(
                entry("stamp_uses", "stamps", "zoned", "async_delete")
                    + "    conditions: { payload: '{}' }\n"))
        .endsWith(
            "has condition payload = '{}', which column payload of type json cannot be compared"
                + " with: PostgreSQL has no = operator for that type, so every cleanup would fail"
                + " (jsonb has one where json has not).");
    assertThat(
            error(
                entry("stamp_uses", "stamps", "zoned", "update_column_to")
                    + "    target_column: payload\n    target_value: '{}'\n"))
        .contains("has target_value '{}', which column payload of type json cannot be compared");
  }

  @Test
  void should_accept_a_value_compared_with_a_jsonb_column() throws Exception {
    assertThat(
            check(
                    entry("stamp_uses", "stamps", "zoned", "async_delete")
                        + "    conditions: { doc: '{}' }\n")
                .keys())
        .hasSize(1);
  }

  @Test
  void should_refuse_a_parent_that_tables_inherit_from() {
    // Their rows' deletes come under their own names, which no route reads.
    assertThat(error(entry("old_event_uses", "old_events", "event_id", "async_delete")))
        .endsWith(
            "names parent table k.old_events, which tables inherit from (k.old_events_2023): a"
                + " delete of a row stored in one of them is captured under that table's name,"
                + " and its children would never be cleaned; a parent must be a plain or a"
                + " partitioned (PARTITION BY) table.");
  }

  @Test
  void should_refuse_a_table_whose_row_security_applies_to_spillways_role() throws Exception {
    String role = "chk_cleaner";
    javax.sql.DataSource admin = dbs.dataSource("chk_main");
    TestSql.exec(
        admin,
        "DROP SCHEMA IF EXISTS r CASCADE",
        "DROP ROLE IF EXISTS " + role,
        "CREATE SCHEMA r",
        "CREATE TABLE r.projects (id bigint PRIMARY KEY)",
        "CREATE TABLE r.issues (id bigint PRIMARY KEY, project_id bigint)",
        "CREATE INDEX ON r.issues (project_id)",
        "CREATE ROLE " + role + " LOGIN PASSWORD 'pw'",
        "GRANT USAGE ON SCHEMA r TO " + role,
        "GRANT SELECT ON ALL TABLES IN SCHEMA r TO " + role);
    dev.spillway.jdbc.DatabaseEndpoint e = EmbeddedInfra.get().database("chk_main");
    Path file = dir.resolve("lfk.yml");
    Files.writeString(
        file,
        "r.issues:\n  - table: r.projects\n    column: project_id\n    on_delete: async_delete\n");
    try (Databases asRole = TestSql.databasesAs(e, "main", role)) {
      java.util.function.Function<javax.sql.DataSource, DefinitionCheck.Result> checkAs =
          ds -> {
            try {
              return DefinitionCheck.check(DefinitionsFile.read(file), t -> "main", n -> ds);
            } catch (java.sql.SQLException ex) {
              throw new IllegalStateException(ex);
            }
          };
      assertThat(checkAs.apply(asRole.dataSource("main")).keys()).hasSize(1);

      TestSql.exec(admin, "ALTER TABLE r.projects ENABLE ROW LEVEL SECURITY");
      assertThatThrownBy(() -> checkAs.apply(asRole.dataSource("main")))
          .isInstanceOf(ConfigException.class)
          .hasMessageEndingWith(
              "r.issues.project_id → r.projects (async_delete) names parent table r.projects,"
                  + " whose row-level security applies to Spillway's role, so cleanup would fail"
                  + " on it (it does not let a policy hide rows it reads); make the role the"
                  + " table's owner (without FORCE ROW LEVEL SECURITY) or give it BYPASSRLS.");
      assertThat(checkAs.apply(admin).keys())
          .as("a role that bypasses row security, as a superuser does")
          .hasSize(1);

      TestSql.exec(
          admin,
          "ALTER TABLE r.projects DISABLE ROW LEVEL SECURITY",
          "ALTER TABLE r.issues ENABLE ROW LEVEL SECURITY");
      assertThatThrownBy(() -> checkAs.apply(asRole.dataSource("main")))
          .isInstanceOf(ConfigException.class)
          .hasMessageContaining("names child table r.issues, whose row-level security applies");
    } finally {
      TestSql.exec(admin, "DROP SCHEMA r CASCADE", "DROP OWNED BY " + role, "DROP ROLE " + role);
    }
  }
}
