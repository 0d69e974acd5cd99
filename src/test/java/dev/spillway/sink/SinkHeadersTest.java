package dev.spillway.sink;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.junit.jupiter.api.Test;

class SinkHeadersTest {
  @Test
  void should_keep_a_short_message_whole() {
    RecordHeaders h = new RecordHeaders();
    SinkHeaders.addFailure(h, "E", "permission denied", "t-0@1", 0);

    assertThat(SinkHeaders.text(h.lastHeader(SinkHeaders.ERROR_MESSAGE).value()))
        .isEqualTo("permission denied");
  }

  @Test
  void should_cut_a_long_message_to_whole_characters_saying_so() {
    // A handler's reason of two-byte characters, three times the header's room.
    String reason = "é".repeat(3 * SinkHeaders.MESSAGE_KEPT_BYTES / 2);
    RecordHeaders h = new RecordHeaders();
    SinkHeaders.addFailure(h, "E", reason, "t-0@1", 0);

    byte[] kept = h.lastHeader(SinkHeaders.ERROR_MESSAGE).value();
    String text = new String(kept, StandardCharsets.UTF_8);
    assertThat(kept.length).isLessThanOrEqualTo(SinkHeaders.MESSAGE_KEPT_BYTES);
    assertThat(text).endsWith(" … (cut; " + 3 * SinkHeaders.MESSAGE_KEPT_BYTES + " bytes in all)");
    assertThat(text.substring(0, text.indexOf(" … "))).matches("é{4000,}");
  }
}
