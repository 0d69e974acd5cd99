package dev.spillway.lfk;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class CheckedKeyTest {
  private static CheckedKey child(String columnType) {
    return LfkHarness.key(
        "logins", "account_id", "accounts", OnDelete.ASYNC_DELETE, "main", "main", columnType);
  }

  @Test
  void should_tell_the_ids_an_integer_column_can_hold() {
    CheckedKey integer = child("integer");
    assertThat(integer.columnHolds("5")).isTrue();
    assertThat(integer.columnHolds("-2147483648")).isTrue();
    assertThat(integer.columnHolds("2147483647")).isTrue();
    assertThat(integer.columnHolds("2147483648")).as("a bigint key past integer's range").isFalse();
    assertThat(integer.columnHolds("-2147483649")).isFalse();
    assertThat(integer.columnHolds("1.5")).as("a numeric key the cast would round").isFalse();
    assertThat(child("smallint").columnHolds("32768")).isFalse();
    assertThat(child("bigint").columnHolds("9223372036854775807")).isTrue();
    assertThat(child("bigint").columnHolds("9223372036854775808")).isFalse();
  }

  @Test
  void should_take_any_id_for_a_column_of_another_type() {
    assertThat(child("text").columnHolds("2147483648")).isTrue();
    assertThat(child("uuid").columnHolds("0b6e3f0e-0000-4000-8000-000000000001")).isTrue();
  }
}
