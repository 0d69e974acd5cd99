package dev.spillway.cli;

import static org.assertj.core.api.Assertions.assertThat;

import dev.spillway.event.TableName;
import dev.spillway.lfk.LooseForeignKey;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

class LfkStartupTest {
  @Test
  void should_warn_of_each_tables_entry_no_definition_nor_buffer_names() {
    List<LooseForeignKey> definitions =
        List.of(
            LooseForeignKey.asyncDelete(
                TableName.parse("ci_pipelines"), TableName.parse("projects"), "project_id", ""));

    assertThat(
            LfkStartup.unrouted(
                new java.util.LinkedHashSet<>(
                    List.of(
                        "public.ci_pipelines",
                        "public.ci_pipeline",
                        "audit.events",
                        "public.contact_activity_events")),
                definitions,
                List.of(TableName.parse("contact_activity_events"))))
        .containsExactly(
            "tables: public.ci_pipeline is no table of a loose foreign key (child or parent) nor a"
                + " buffer's in the configuration (did you mean public.ci_pipelines?), so it places"
                + " no table.",
            "tables: audit.events is no table of a loose foreign key (child or parent) nor a"
                + " buffer's in the configuration, so it places no table.");
    assertThat(LfkStartup.unrouted(Set.of("public.projects"), definitions, List.of())).isEmpty();
    assertThat(
            LfkStartup.unrouted(
                Set.of("public.contact_activity_events"),
                List.of(),
                List.of(TableName.parse("contact_activity_events"))))
        .as("a buffer's table, placed by the entry when the buffer names no database")
        .isEmpty();
  }
}
