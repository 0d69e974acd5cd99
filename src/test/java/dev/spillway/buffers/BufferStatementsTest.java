package dev.spillway.buffers;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class BufferStatementsTest {
  @Test
  void should_write_a_row_as_the_text_of_a_record_in_column_order() {
    Map<String, Object> row = new LinkedHashMap<>();
    row.put("note", "say \"hi\", (then) \\ leave");
    row.put("id", 7L);
    row.put("payload", new byte[] {0, 1, (byte) 0xff});
    row.put("ratio", 0.5);
    row.put("flag", true);
    row.put("gone", null);
    row.put("not_a_column", "ignored");

    assertThat(
            BufferStatements.recordText(
                List.of("id", "note", "payload", "ratio", "flag", "gone", "added"), row))
        .isEqualTo(
            "(\"7\",\"say \\\"hi\\\", (then) \\\\ leave\",\"\\\\x0001ff\",\"0.5\",\"true\",,)");
  }

  @Test
  void should_write_an_empty_text_quoted_so_it_is_not_read_as_null() {
    Map<String, Object> row = new LinkedHashMap<>();
    row.put("id", 1);
    row.put("note", "");
    assertThat(BufferStatements.recordText(List.of("id", "note"), row)).isEqualTo("(\"1\",\"\")");
  }
}
