package dev.spillway.capture;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.spillway.event.Topics;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class CaptureSettingsTest {
  private static CaptureSettings settings(String prefix) {
    return new CaptureSettings(
        "localhost:9092",
        new Topics(prefix),
        3,
        (short) 1,
        Map.of(),
        CaptureSettings.DEFAULT_POLL_INTERVAL,
        CaptureSettings.DEFAULT_HEARTBEAT_INTERVAL,
        CaptureSettings.DEFAULT_MAX_BATCH_SIZE,
        Duration.ofMillis(200));
  }

  @Test
  void should_name_the_slot_alike_whatever_the_jvms_language() {
    java.util.Locale before = java.util.Locale.getDefault();
    try {
      // Turkish lower-cases I to a dotless i, which is not among a slot name's characters.
      java.util.Locale.setDefault(java.util.Locale.forLanguageTag("tr-TR"));
      assertThat(settings("ACME-INT").slotName("MAIN")).isEqualTo("acme_int_main");
    } finally {
      java.util.Locale.setDefault(before);
    }
  }

  @Test
  void should_refuse_databases_that_would_share_a_slot() {
    assertThatThrownBy(() -> settings("spillway").checkSlotNames(List.of("main", "ci-1", "CI_1")))
        .isInstanceOf(CaptureSetupException.class)
        .hasMessage(
            "Databases ci-1 and CI_1 would share the replication slot and publication"
                + " spillway_ci_1; rename one of them under databases:.");
    assertThatCode(() -> settings("spillway").checkSlotNames(List.of("main", "ci")))
        .doesNotThrowAnyException();
  }

  @Test
  void should_refuse_a_slot_name_longer_than_postgresql_takes() {
    String prefix = "p".repeat(57);
    assertThatCode(() -> settings(prefix).checkSlotNames(List.of("main1")))
        .as("63 characters")
        .doesNotThrowAnyException();
    assertThatThrownBy(() -> settings(prefix).checkSlotNames(List.of("main12")))
        .isInstanceOf(CaptureSetupException.class)
        .hasMessage(
            "kafka.topic-prefix would name the replication slot and publication of database"
                + " main12 "
                + prefix
                + "_main12, 64 characters where PostgreSQL takes at most 63; shorten"
                + " kafka.topic-prefix or the database's name.");
  }

  @Test
  void should_name_each_slot_a_signal_table_postgresql_takes_whole() {
    assertThat(CaptureStatements.signalTable("spillway_main"))
        .isEqualTo("spillway.spillway_main_signal");
    String longest = CaptureStatements.signalTable("p".repeat(63));
    assertThat(longest.substring("spillway.".length())).hasSizeLessThanOrEqualTo(63);
    assertThat(longest).isNotEqualTo(CaptureStatements.signalTable("q".repeat(63)));
    // Two names a String hash takes for one: 'c' * 31 + '0' = 'a' * 31 + 'n'.
    String c0 = "p".repeat(61) + "c0";
    String an = "p".repeat(61) + "an";
    assertThat(c0.hashCode()).isEqualTo(an.hashCode());
    assertThat(CaptureStatements.signalTable(c0)).isNotEqualTo(CaptureStatements.signalTable(an));
    assertThat(CaptureStatements.earlierSignalTables(c0))
        .containsExactly(
            "spillway.capture_signal", "spillway.signal_" + Integer.toHexString(c0.hashCode()));
    assertThat(CaptureStatements.earlierSignalTables("spillway_main"))
        .containsExactly("spillway.capture_signal");
  }
}
