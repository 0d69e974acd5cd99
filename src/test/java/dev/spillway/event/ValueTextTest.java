package dev.spillway.event;

import static org.assertj.core.api.Assertions.assertThat;

import java.math.BigDecimal;
import java.util.UUID;
import org.junit.jupiter.api.Test;

class ValueTextTest {
  @Test
  void should_write_bytes_as_bytea_hex_and_other_values_as_their_text() {
    assertThat(ValueText.of(new byte[] {0, 1, (byte) 0xff})).isEqualTo("\\x0001ff");
    assertThat(ValueText.of(new byte[0])).isEqualTo("\\x");
    assertThat(ValueText.of(42L)).isEqualTo("42");
    assertThat(ValueText.of(new BigDecimal("1.50"))).isEqualTo("1.50");
    assertThat(ValueText.of(UUID.fromString("8f1c0000-0000-0000-0000-000000000001")))
        .isEqualTo("8f1c0000-0000-0000-0000-000000000001");
  }

  @Test
  void should_quote_with_a_backslash_before_each_quote_and_backslash() {
    assertThat(ValueText.appendQuoted(new StringBuilder("x="), "a\"b\\c d").toString())
        .isEqualTo("x=\"a\\\"b\\\\c d\"");
    assertThat(ValueText.appendQuoted(new StringBuilder(), "").toString()).isEqualTo("\"\"");
  }
}
