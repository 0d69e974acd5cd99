package dev.spillway.cli;

import static org.assertj.core.api.Assertions.assertThat;

import dev.spillway.event.TableName;
import dev.spillway.lfk.CheckedKey;
import dev.spillway.lfk.LooseForeignKey;
import dev.spillway.lfk.OrphanSweep;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

class LfkSweepCommandTest {
  private static final CheckedKey KEY =
      new CheckedKey(
          LooseForeignKey.asyncDelete(
              TableName.parse("ci_builds"),
              TableName.parse("ci_pipelines"),
              "pipeline_id",
              "lfk.yml:3"),
          "ci",
          "ci",
          List.of("id"),
          "bigint",
          "id",
          "bigint",
          Optional.empty());

  @Test
  void should_show_ten_ids_of_a_parent_and_count_the_rest() {
    List<String> ids = IntStream.rangeClosed(1, 12).mapToObj(String::valueOf).toList();
    OrphanSweep.Result result =
        new OrphanSweep.Result(
            List.of(new OrphanSweep.Finding(KEY, 1200, 3, 12, 0)),
            Map.of(new OrphanSweep.Parent("ci", TableName.parse("ci_pipelines"), "id"), ids));
    assertThat(
            LfkSweepCommand.render(
                result,
                false,
                new OrphanSweep.HandOver(12, 0, null),
                "spillway.lfk.deleted-records"))
        .isEqualTo(
            """
            Swept 1 loose foreign key:
              ci_builds.pipeline_id → ci_pipelines (async_delete)  1,200 parent ids referred to, 12 deleted, 3 no value of the parent's key type
            Handed to the cleanup (spillway.lfk.deleted-records):
              ci_pipelines (ci)                        12 deleted rows: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, and 2 more
            Running Spillway cleans their children like captured deletes; 'lfk status' shows them until it has.
            """);
  }

  @Test
  void should_say_when_nothing_was_found_or_nothing_is_defined() {
    OrphanSweep.Result clean =
        new OrphanSweep.Result(List.of(new OrphanSweep.Finding(KEY, 7, 0, 0, 0)), Map.of());
    assertThat(LfkSweepCommand.render(clean, true, null, "t"))
        .endsWith(
            "7 parent ids referred to, 0 deleted\nNo child refers to a deleted parent row.\n");
    assertThat(LfkSweepCommand.render(new OrphanSweep.Result(List.of(), Map.of()), true, null, "t"))
        .isEqualTo("No loose foreign keys to sweep.\n");
    CheckedKey withoutIndex =
        new CheckedKey(
            KEY.key(),
            "ci",
            "ci",
            List.of("id"),
            "bigint",
            "id",
            "bigint",
            Optional.of("no index starts with pipeline_id (add one, as the warning says)"));
    OrphanSweep.Result unindexed =
        new OrphanSweep.Result(
            List.of(new OrphanSweep.Finding(withoutIndex, 0, 0, 0, 0)), Map.of());
    assertThat(LfkSweepCommand.render(unindexed, true, null, "t"))
        .startsWith("Swept 0 of 1 loose foreign key:\n")
        .contains(
            "ci_builds.pipeline_id → ci_pipelines (async_delete)  not swept: no index starts with"
                + " pipeline_id (add one, as the warning says)\n")
        .endsWith("None could be swept: no child was read.\n");
    assertThat(
            JsonOut.of(LfkSweepCommand.JsonResult.of(unindexed, "t", true, null))
                .replaceAll("\\s+", " "))
        .contains(
            "\"swept\" : false, \"notSwept\" : \"no index starts with pipeline_id (add one, as the"
                + " warning says)\"");
    OrphanSweep.Result oneOfTwo =
        new OrphanSweep.Result(
            List.of(
                new OrphanSweep.Finding(withoutIndex, 0, 0, 0, 0),
                new OrphanSweep.Finding(KEY, 7, 0, 0, 0)),
            Map.of());
    assertThat(LfkSweepCommand.render(oneOfTwo, true, null, "t"))
        .startsWith("Swept 1 of 2 loose foreign keys:\n")
        .endsWith("No child of the keys swept refers to a deleted parent row.\n");
  }

  @Test
  void should_count_apart_the_values_cleanup_would_leave() {
    OrphanSweep.Result result =
        new OrphanSweep.Result(
            List.of(new OrphanSweep.Finding(KEY, 3, 0, 1, 1)),
            Map.of(
                new OrphanSweep.Parent("ci", TableName.parse("ci_pipelines"), "id"), List.of("9")));
    assertThat(LfkSweepCommand.render(result, true, null, "t"))
        .contains(
            "3 parent ids referred to, 1 deleted, 1 referring to none but ending in spaces the key"
                + " drops (cleanup leaves those)\n");
  }

  @Test
  void should_say_how_many_kafka_took_when_it_refused_some() {
    OrphanSweep.Result result =
        new OrphanSweep.Result(
            List.of(new OrphanSweep.Finding(KEY, 9, 0, 5, 0)),
            Map.of(
                new OrphanSweep.Parent("ci", TableName.parse("ci_pipelines"), "id"),
                List.of("1", "2", "3", "4", "5")));
    assertThat(
            LfkSweepCommand.render(
                result, false, new OrphanSweep.HandOver(3, 2, "timeout"), "spillway.t"))
        .contains("Found deleted; Kafka took 3 of their 5 records for the cleanup (spillway.t):\n")
        .doesNotContain("Handed to the cleanup")
        .doesNotContain("Running Spillway cleans");
  }
}
