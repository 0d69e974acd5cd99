package dev.spillway.cli;

import static org.assertj.core.api.Assertions.assertThat;

import dev.spillway.ops.ConsumerLag.Lag;
import dev.spillway.ops.StatusReport.LagStatus;
import dev.spillway.ops.StatusText;
import java.time.Instant;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/** How {@code spillway lag} lays out its lines. */
class LagCommandTest {

  @Test
  void should_show_each_group_and_topic_with_the_age_of_its_oldest_waiting_record() {
    Instant now = Instant.parse("2026-11-24T12:00:00Z");
    List<LagStatus> lags =
        Stream.of(
                new Lag("spillway.buffers.a", "spillway.buffers.a.events", 6, 0, null, 1),
                new Lag(
                    "spillway.lfk.sink",
                    "spillway.lfk.cleanup-batches",
                    6,
                    1200,
                    now.minusSeconds(125).toEpochMilli(),
                    2),
                // Records wait whose oldest could not be read in time.
                new Lag("spillway.lfk.batcher", "spillway.lfk.deleted-records", 6, 40, null, 1))
            .map(l -> LagStatus.of(l, now))
            .toList();

    assertThat(StatusText.lag(lags, now))
        .isEqualTo(
            """
            GROUP                 TOPIC                                LAG  OLDEST WAITING  MEMBERS
            spillway.buffers.a    spillway.buffers.a.events              0               -        1
            spillway.lfk.sink     spillway.lfk.cleanup-batches        1200          2m 05s        2
            spillway.lfk.batcher  spillway.lfk.deleted-records          40               ?        1
            """);
    assertThat(StatusText.lag(List.of(), now))
        .isEqualTo("No consumer groups of Spillway's in Kafka yet.\n");
  }
}
