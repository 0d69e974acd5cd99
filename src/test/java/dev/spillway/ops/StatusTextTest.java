package dev.spillway.ops;

import static org.assertj.core.api.Assertions.assertThat;

import dev.spillway.ops.ConsumerLag.Lag;
import java.time.Instant;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

class StatusTextTest {
  private static final Instant NOW = Instant.parse("2026-11-24T10:00:00Z");

  private static StatusReport report(String lagReadAt, List<StatusReport.LagStatus> lag) {
    return report(List.of(), lagReadAt, lag);
  }

  private static StatusReport report(
      List<StatusReport.BufferStatus> buffers, String lagReadAt, List<StatusReport.LagStatus> lag) {
    return report(List.of(), buffers, lagReadAt, lag);
  }

  /** These databases, nothing captured, healthy, no sink. */
  private static StatusReport report(List<StatusReport.DatabaseStatus> databases) {
    return report(databases, List.of(), null, List.of());
  }

  private static StatusReport report(
      List<StatusReport.DatabaseStatus> databases,
      List<StatusReport.BufferStatus> buffers,
      String lagReadAt,
      List<StatusReport.LagStatus> lag) {
    return report(databases, buffers, lagReadAt, lag, NOW.toString());
  }

  private static StatusReport report(
      List<StatusReport.DatabaseStatus> databases,
      List<StatusReport.BufferStatus> buffers,
      String lagReadAt,
      List<StatusReport.LagStatus> lag,
      String madeAt) {
    return report(databases, List.of(), false, buffers, lagReadAt, lag, madeAt);
  }

  private static StatusReport report(
      List<StatusReport.DatabaseStatus> databases,
      List<StatusReport.CaptureCount> capture,
      boolean captureStarting,
      List<StatusReport.BufferStatus> buffers,
      String lagReadAt,
      List<StatusReport.LagStatus> lag,
      String madeAt) {
    return new StatusReport(
        42,
        "2026-11-24T09:00:00Z",
        new StatusReport.KafkaStatus("localhost:9092", false),
        databases,
        capture,
        captureStarting,
        List.of(),
        List.of(),
        buffers,
        lagReadAt,
        lag,
        null,
        madeAt);
  }

  @Test
  void should_say_how_old_a_report_is_only_when_a_newer_one_is_late() {
    assertThat(
            StatusText.render(
                report(List.of(), List.of(), null, List.of(), "2026-11-24T09:59:57Z"), NOW))
        .doesNotContain("Report");
    assertThat(StatusText.render(report(List.of(), List.of(), null, List.of(), null), NOW))
        .as("a report from a process that does not say")
        .doesNotContain("Report");
    assertThat(
            StatusText.render(
                report(List.of(), List.of(), null, List.of(), "2026-11-24T09:58:55Z"), NOW))
        .contains(
            "Report    made at 2026-11-24T09:58:55Z (1m 05s ago); a newer one is still being made"
                + " (a database slow to answer?)"
                + System.lineSeparator());
  }

  @Test
  void should_show_each_groups_lag_as_last_read() {
    String text =
        StatusText.render(
            report(
                "2026-11-24T09:59:55Z",
                Stream.of(
                        new Lag("s.buffers.sink", "s.buffers.a.batches", 3, 0, null, 1),
                        new Lag(
                            "s.lfk.sink",
                            "s.lfk.cleanup-batches",
                            3,
                            1200,
                            NOW.minusSeconds(90).toEpochMilli(),
                            2))
                    .map(l -> StatusReport.LagStatus.of(l, NOW.minusSeconds(5)))
                    .toList()),
            NOW);

    assertThat(text)
        .contains(
            """
            Lag       read at 2026-11-24T09:59:55Z
              GROUP           TOPIC                         LAG  OLDEST WAITING  MEMBERS
              s.buffers.sink  s.buffers.a.batches             0               -        1
              s.lfk.sink      s.lfk.cleanup-batches        1200          1m 30s        2
            """
                .replace("\n", System.lineSeparator()));
  }

  @Test
  void should_say_when_the_lag_could_not_be_read() {
    assertThat(StatusText.render(report(null, List.of()), NOW))
        .contains("Lag       not read from Kafka yet, or Kafka cannot be read");
    assertThat(StatusText.render(report("2026-11-24T09:59:55Z", List.of()), NOW))
        .contains("  No consumer groups of Spillway's in Kafka yet.");
  }

  @Test
  void should_show_a_buffers_latency_only_when_rows_were_timed_lately() {
    StatusReport r =
        report(
            List.of(
                new StatusReport.BufferStatus(
                    "a", "main", "public.a", 3, 1, 40, 0, 0, 0, 0, 0, 12.4, 251.6),
                new StatusReport.BufferStatus(
                    "b", "main", "public.b", 0, 0, 12, 3, 12, 0, 0, 1_234, null, null)),
            null,
            List.of());

    assertThat(StatusText.render(r, NOW))
        .contains(
            "handled 40  DLQ 0 batches (0 events)  insert->handled p50 12 ms p99 252 ms"
                + System.lineSeparator())
        .contains(
            "handled 12  DLQ 3 batches (12 events)  insert->handled p50 - p99 -  passed over"
                + " 1,234 inserts published twice");
  }

  @Test
  void should_count_in_a_buffers_dlq_the_rows_too_large_for_kafka_and_the_unreadable_events() {
    StatusReport r =
        report(
            List.of(
                new StatusReport.BufferStatus(
                    "a", "main", "public.a", 0, 0, 0, 2, 9, 1, 0, 0, null, null),
                new StatusReport.BufferStatus(
                    "b", "main", "public.b", 0, 0, 0, 0, 0, 2_000, 1, 0, null, null),
                new StatusReport.BufferStatus(
                    "c", "main", "public.c", 0, 0, 0, 0, 0, 0, 3, 0, null, null)),
            null,
            List.of());

    assertThat(StatusText.render(r, NOW))
        .contains("DLQ 2 batches (9 events), 1 row too large for Kafka  insert->handled")
        .contains(
            "DLQ 0 batches (0 events), 2,000 rows too large for Kafka, 1 unreadable event "
                + " insert->handled")
        .contains("DLQ 0 batches (0 events), 3 unreadable events  insert->handled");
  }

  @Test
  void should_say_a_count_of_rows_waiting_above_100_000_is_an_estimate() {
    StatusReport r =
        report(
            List.of(
                new StatusReport.BufferStatus(
                    "a", "main", "public.a", 100_000, 0, 0, 0, 0, 0, 0, 0, null, null),
                new StatusReport.BufferStatus(
                    "b", "main", "public.b", 2_345_678, 0, 0, 0, 0, 0, 0, 0, null, null),
                new StatusReport.BufferStatus(
                    "c", "main", "public.c", -1, 0, 0, 0, 0, 0, 0, 0, null, null)),
            null,
            List.of());

    assertThat(StatusText.render(r, NOW))
        .containsPattern("Buffer +a +rows waiting 100,000  batches")
        .containsPattern("Buffer +b +rows waiting about 2,345,678  batches")
        .containsPattern("Buffer +c +rows waiting \\?  batches");
  }

  @Test
  void should_show_how_close_each_slot_is_to_being_invalidated() {
    StatusReport r =
        report(
            List.of(
                new StatusReport.DatabaseStatus(
                    "main",
                    "jdbc:postgresql://db/main",
                    false,
                    List.of(
                        new StatusReport.SlotStatus("spillway_main", true, true, 2048, null, null),
                        new StatusReport.SlotStatus(
                            "limited", true, false, 3L << 20, 5L << 30, null),
                        new StatusReport.SlotStatus("behind", true, false, 2L << 30, 0L, null),
                        new StatusReport.SlotStatus("gone", true, false, 0, null, "wal_removed"),
                        new StatusReport.SlotStatus("other_app", false, true, 4096, null, null)),
                    null,
                    null,
                    null)));

    assertThat(StatusText.render(r, NOW))
        .contains(
            """
                      slot spillway_main            active   WAL held 2.0 kB
                      slot limited                  inactive WAL held 3.0 MB, invalidated after 5.0 GB more
                      slot behind                   inactive WAL held 2.0 GB, to be invalidated at the next checkpoint unless it catches up
                      slot gone                     inactive WAL held 0 B, INVALIDATED by the server (wal_removed)
                      slot other_app                active   WAL held 4.0 kB (not this installation's)
            """
                .replace("\n", System.lineSeparator()));
  }

  @Test
  void should_say_since_when_capture_waits_for_kafka_or_stands_by_for_another_instance() {
    StatusReport r =
        report(
            List.of(
                new StatusReport.DatabaseStatus(
                    "main",
                    "jdbc:postgresql://db/main",
                    false,
                    List.of(),
                    null,
                    new StatusReport.KafkaWait(
                        NOW.minusSeconds(754).toString(), "Topic spillway.lfk.deletes not present"),
                    null),
                new StatusReport.DatabaseStatus(
                    "ci",
                    "jdbc:postgresql://db/ci",
                    false,
                    List.of(),
                    null,
                    new StatusReport.KafkaWait(NOW.minusSeconds(12).toString(), null),
                    null),
                new StatusReport.DatabaseStatus(
                    "idle",
                    "jdbc:postgresql://db/idle",
                    false,
                    List.of(),
                    null,
                    null,
                    NOW.minusSeconds(3 * 3600 + 120).toString())));

    assertThat(StatusText.render(r, NOW))
        .contains(
            "capture waits for Kafka since "
                + NOW.minusSeconds(754)
                + " (12m 34s ago): Topic spillway.lfk.deletes not present; its changes stay in the"
                + " slot and are sent again until Kafka takes them")
        .contains(
            "capture waits for Kafka since "
                + NOW.minusSeconds(12)
                + " (12s ago): no answer from Kafka yet;")
        .containsOnlyOnce("(12s ago)")
        .contains(
            "capture stands by since "
                + NOW.minusSeconds(3 * 3600 + 120)
                + " (3h 02m ago): its slot streams to another instance; this one takes it over once"
                + " that one lets it go")
        .containsOnlyOnce("capture stands by")
        .contains("Capture   none in this process yet: it stands by for another instance (above)");
  }

  @Test
  void should_say_capture_starts_until_it_is_set_up_and_nothing_configured_only_after() {
    String starting =
        StatusText.render(
            report(List.of(), List.of(), true, List.of(), null, List.of(), null), NOW);
    assertThat(starting)
        .contains(
            "Capture   starting: its slots and publications are being set up, nothing captured yet")
        .doesNotContain("nothing configured");
    assertThat(
            StatusText.render(
                report(List.of(), List.of(), false, List.of(), null, List.of(), null), NOW))
        .contains("Capture   nothing configured to capture")
        .doesNotContain("Capture   starting");
    assertThat(
            StatusText.render(
                report(
                    List.of(),
                    List.of(new StatusReport.CaptureCount("main", "public.projects", "delete", 3)),
                    false,
                    List.of(),
                    null,
                    List.of(),
                    null),
                NOW))
        .contains("Captured changes since start")
        .doesNotContain("Capture   ");
  }
}
