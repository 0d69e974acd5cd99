package dev.spillway.capture;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class SourcePreparationTest {

  @Test
  void should_explain_each_reason_the_server_gives_for_invalidating_a_slot() {
    assertThat(SourcePreparation.invalidatedSlot("main", "spillway_main", "idle_timeout"))
        .startsWith(
            "Replication slot spillway_main of database main was invalidated by the server"
                + " (idle_timeout: it was idle longer than idle_replication_slot_timeout), so")
        .contains("(SELECT pg_drop_replication_slot('spillway_main'))");
    assertThat(SourcePreparation.invalidatedSlot("main", "s", "wal_level_insufficient"))
        .contains("(wal_level_insufficient: wal_level was set below logical)");
    assertThat(SourcePreparation.invalidatedSlot("main", "s", "rows_removed"))
        .contains("(rows_removed: catalog rows it needed were vacuumed away)");
    assertThat(SourcePreparation.invalidatedSlot("main", "s", "a_later_reason"))
        .as("a reason of a later server, named as it is")
        .contains("by the server (a_later_reason), so");
  }
}
