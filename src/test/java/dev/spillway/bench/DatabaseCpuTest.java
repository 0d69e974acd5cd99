package dev.spillway.bench;

import static org.assertj.core.api.Assertions.assertThat;

import dev.spillway.bench.DatabaseCpu.WalSenders;
import java.util.Map;
import org.junit.jupiter.api.Test;

class DatabaseCpuTest {
  @Test
  void should_add_what_each_wal_sender_used_since_and_all_that_new_ones_used() {
    WalSenders before = new WalSenders(Map.of(10L, 500L));
    WalSenders after = new WalSenders(Map.of(10L, 800L, 11L, 150L));

    assertThat(after.secondsSince(before)).hasValue(4.5);
  }

  @Test
  void should_not_know_when_a_wal_sender_ended_since() {
    WalSenders before = new WalSenders(Map.of(10L, 500L));
    WalSenders reconnected = new WalSenders(Map.of(12L, 900L));

    assertThat(reconnected.secondsSince(before)).isEmpty();
  }

  @Test
  void should_count_nothing_without_wal_senders() {
    WalSenders none = new WalSenders(Map.of());

    assertThat(none.secondsSince(none)).hasValue(0.0);
  }
}
