package dev.spillway.capture;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.spillway.event.TableName;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** How tables are named to Debezium. */
class CaptureEngineTest {
  @ParameterizedTest
  @ValueSource(strings = {"Events+EU", "a,b", "audit$events", "events"})
  void should_name_a_table_for_a_snapshot_as_a_literal_pattern(String table) {
    String name = CaptureEngine.snapshotName(new TableName("app", table));

    assertThat("app." + table).matches(name);
    assertThat("app." + table + "x").doesNotMatch(name);
  }

  @ParameterizedTest
  @ValueSource(strings = {"x.y", "my events", "say\"hi\"", "it's", "back`tick"})
  void should_refuse_a_name_debezium_would_read_back_as_another_table(String table) {
    assertThatThrownBy(() -> CaptureEngine.snapshotName(new TableName("app", table)))
        .isInstanceOf(CaptureSetupException.class)
        .hasMessageStartingWith("Table app." + table + " holds rows from before capture");
  }
}
