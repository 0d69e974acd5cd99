package dev.spillway.cli;

import static org.assertj.core.api.Assertions.assertThat;

import dev.spillway.lfk.LfkBacklog;
import dev.spillway.ops.StatusText;
import io.micrometer.core.instrument.Counter;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;

class LfkStatusCommandTest {
  private static final Instant NOW = Instant.parse("2026-11-22T12:00:00Z");

  @Test
  void should_show_pending_age_rescheduled_dead_lettered_and_processed_per_parent() {
    long twoMinutesAgo = (NOW.getEpochSecond() - 125) * 1_000_000;
    List<LfkStatusCommand.Row> rows =
        LfkStatusCommand.rows(
            List.of(new LfkBacklog.Parent("main", "public.projects", 1200, twoMinutesAgo, 200, 7)),
            Optional.of(Map.of("main/public.projects", 300L, "ci/public.ci_pipelines", 40L)),
            NOW);
    assertThat(rows)
        .extracting(
            r ->
                r.table()
                    + " "
                    + r.pending()
                    + " "
                    + r.oldestPending()
                    + " "
                    + r.rescheduled()
                    + " "
                    + r.deadLettered()
                    + " "
                    + r.processed())
        .containsExactly("public.ci_pipelines 0 - 0 0 40", "public.projects 1200 2m 05s 200 7 300");
    assertThat(LfkStatusCommand.render(rows, true, null))
        .contains("PARENT TABLE")
        .contains("DEAD-LETTERED")
        .contains(
            "public.projects                  main             1200           2m 05s          200              7        300")
        .endsWith(
            "7 deleted rows' children wait in dead letters: `bin/spillway replay lfk` hands their"
                + " cleanups back once the cause is mended.\n"
                + "PROCESSED counts since the running process started.\n");
    assertThat(LfkStatusCommand.render(rows, true, "it answered /metrics on port 1 with HTTP 503."))
        .endsWith(
            "PROCESSED counts could not be read from the running process: it answered /metrics on"
                + " port 1 with HTTP 503.\n");
  }

  @Test
  void should_read_processed_counts_of_tables_whose_names_the_metrics_page_escapes() {
    PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    for (String table : List.of("public.projects", "public.o\"rders", "public.a\\b")) {
      Counter.builder("loose_foreign_key_processed_deleted_records")
          .tag("table", table)
          .tag("database", "main")
          .register(registry)
          .increment(table.length());
    }

    assertThat(LfkStatusCommand.processed(registry.scrape()))
        .containsOnly(
            Map.entry("main/public.projects", 15L),
            Map.entry("main/public.o\"rders", 14L),
            Map.entry("main/public.a\\b", 10L));
  }

  @Test
  void should_count_none_processed_apart_from_counts_it_could_not_read() {
    List<LfkBacklog.Parent> backlog =
        List.of(
            new LfkBacklog.Parent(
                "main", "public.projects", 5, NOW.getEpochSecond() * 1_000_000, 0, 0));

    assertThat(LfkStatusCommand.rows(backlog, Optional.of(Map.of()), NOW))
        .as("a running process that finished none of this parent's rows yet")
        .extracting(LfkStatusCommand.Row::processed)
        .containsExactly(0L);
    assertThat(LfkStatusCommand.rows(backlog, Optional.empty(), NOW))
        .as("no running process, or its counts unread")
        .extracting(LfkStatusCommand.Row::processed)
        .containsNull();
  }

  @Test
  void should_format_ages_from_seconds_to_days() {
    assertThat(StatusText.age(45)).isEqualTo("45s");
    assertThat(StatusText.age(3 * 3600 + 5 * 60)).isEqualTo("3h 05m");
    assertThat(StatusText.age(2 * 86_400 + 3600)).isEqualTo("2d 01h");
  }

  @Test
  void should_say_so_when_nothing_was_captured() {
    assertThat(LfkStatusCommand.render(List.of(), false, null))
        .isEqualTo("No deleted parent row waits for its cleanup.\n");
  }

  @Test
  void should_say_nothing_of_dead_letters_when_none_waits() {
    List<LfkStatusCommand.Row> rows =
        List.of(new LfkStatusCommand.Row("main", "public.projects", 3, "5s", 5L, 0, 0, null));

    assertThat(LfkStatusCommand.render(rows, false, null)).doesNotContain("dead letters:");
  }
}
