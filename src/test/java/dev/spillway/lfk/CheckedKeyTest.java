package dev.spillway.lfk;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import org.junit.jupiter.api.Test;

class CheckedKeyTest {
  private static CheckedKey child(String columnType) {
    return LfkHarness.key(
        "logins", "account_id", "accounts", OnDelete.ASYNC_DELETE, "main", "main", columnType);
  }

  @Test
  void should_give_the_ids_an_integer_column_can_hold_as_its_values() {
    CheckedKey integer = child("integer");
    assertThat(integer.asColumnValue("5")).contains("5");
    assertThat(integer.asColumnValue("-2147483648")).contains("-2147483648");
    assertThat(integer.asColumnValue("2147483647")).contains("2147483647");
    assertThat(integer.asColumnValue("5.00")).as("a numeric(10,2) key's 5").contains("5");
    assertThat(integer.asColumnValue("2147483648")).as("a bigint key past its range").isEmpty();
    assertThat(integer.asColumnValue("-2147483649")).isEmpty();
    assertThat(integer.asColumnValue("1.5")).as("no integer equals it").isEmpty();
    assertThat(integer.asColumnValue("NaN")).isEmpty();
    assertThat(child("smallint").asColumnValue("32768")).isEmpty();
    assertThat(child("bigint").asColumnValue("9223372036854775807"))
        .contains("9223372036854775807");
    assertThat(child("bigint").asColumnValue("9223372036854775808")).isEmpty();
  }

  @Test
  void should_read_a_floating_point_keys_exponent() {
    CheckedKey integer = referringTo("bigint", "double precision");
    assertThat(integer.asColumnValue("1.2345678E7")).contains("12345678");
    assertThat(integer.asColumnValue("1.0E-5")).as("no integer equals it").isEmpty();
    assertThat(integer.asColumnValue("1.0E300")).as("past bigint's range").isEmpty();
    assertThat(integer.asColumnValue("Infinity")).isEmpty();
    assertThat(child("bigint").asColumnValue("1e999999999"))
        .as("a text key written so: no exponent read, no number of that size built")
        .isEmpty();
  }

  @Test
  void should_drop_a_character_keys_padding_for_a_column_of_another_type() {
    CheckedKey text = referringToCharacter("character varying");
    assertThat(text.asColumnValue("AB      ")).contains("AB");
    assertThat(text.asColumnValue(" A B  ")).as("only trailing spaces").contains(" A B");
    assertThat(referringToCharacter("bpchar").asColumnValue("AB      "))
        .as("a character column compares without it anyway")
        .contains("AB      ");
  }

  @Test
  void should_ask_a_character_column_for_no_text_key_ending_in_a_space() {
    CheckedKey padded = referringTo("bpchar", "text");
    assertThat(padded.asColumnValue("AB "))
        .as("'AB' would answer: a live key's children")
        .isEmpty();
    assertThat(padded.asColumnValue("AB")).contains("AB");
    assertThat(padded.asColumnValue(" AB")).contains(" AB");
  }

  private static CheckedKey referringToCharacter(String columnType) {
    return referringTo(columnType, "bpchar");
  }

  private static CheckedKey referringTo(String columnType, String parentKeyType) {
    return new CheckedKey(
        child(columnType).key(),
        "main",
        "main",
        List.of("id"),
        columnType,
        "code",
        parentKeyType,
        java.util.Optional.empty());
  }

  @Test
  void should_take_any_id_as_it_is_for_a_column_of_another_type() {
    assertThat(child("text").asColumnValue("2147483648")).contains("2147483648");
    assertThat(child("numeric").asColumnValue("5.00")).contains("5.00");
    assertThat(child("uuid").asColumnValue("0b6e3f0e-0000-4000-8000-000000000001"))
        .contains("0b6e3f0e-0000-4000-8000-000000000001");
  }
}
