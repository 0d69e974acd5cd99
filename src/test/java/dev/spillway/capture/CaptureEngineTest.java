package dev.spillway.capture;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.spillway.event.TableName;
import org.junit.jupiter.api.Test;

/** How tables are named to Debezium. */
class CaptureEngineTest {
  @Test
  void should_name_a_table_for_a_snapshot_as_a_literal_pattern_while_its_identifier_reads_back() {
    assertThat(CaptureEngine.snapshotName(new TableName("app", "Events+EU")))
        .isEqualTo("app\\.Events\\+EU");
    assertThat(CaptureEngine.snapshotName(new TableName("app", "a,b"))).isEqualTo("app\\.a\\,b");
  }

  @Test
  void should_quote_a_name_its_identifier_would_split_elsewhere() {
    assertThat(CaptureEngine.snapshotName(new TableName("app", "x.y")))
        .isEqualTo("\"app\".\"x.y\"");
    assertThat(CaptureEngine.snapshotName(new TableName("my app", "say \"hi\"")))
        .isEqualTo("\"my app\".\"say \"\"hi\"\"\"");
  }

  @Test
  void should_refuse_a_quoted_name_that_would_match_other_tables_as_a_pattern() {
    assertThatThrownBy(() -> CaptureEngine.snapshotName(new TableName("app", "a|app.t|b")))
        .isInstanceOf(CaptureSetupException.class)
        .hasMessage(
            "Table app.a|app.t|b cannot be named to Debezium to read the rows it already holds:"
                + " its name has a dot, space or quote together with one of | ( ) [ ] { } \\ or a"
                + " misplaced * + ?; rename it.");
    assertThatThrownBy(() -> CaptureEngine.snapshotName(new TableName("app", "**x.y")))
        .isInstanceOf(CaptureSetupException.class);
  }
}
