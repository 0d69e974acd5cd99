package dev.spillway.health;

import static org.assertj.core.api.Assertions.assertThat;

import dev.spillway.event.TableName;
import dev.spillway.health.HealthMonitor.State;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class HealthStateOrderTest {
  @Test
  void should_list_each_database_before_its_tables_and_tables_by_name() {
    List<State> states =
        new ArrayList<>(
            List.of(
                state("main", "public.merge_requests"),
                state("ci", null),
                state("main", "public.contact_activity_events"),
                state("main", null),
                state("ci", "public.ci_builds")));

    states.sort(State.ORDER);

    assertThat(states)
        .extracting(s -> s.database() + " " + s.table())
        .containsExactly(
            "ci null",
            "ci public.ci_builds",
            "main null",
            "main public.contact_activity_events",
            "main public.merge_requests");
  }

  private static State state(String database, String table) {
    return new State(database, table == null ? null : TableName.parse(table), Health.NORMAL);
  }
}
