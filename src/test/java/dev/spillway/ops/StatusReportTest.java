package dev.spillway.ops;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import dev.spillway.ops.ConsumerLag.Lag;
import dev.spillway.ops.StatusReport.LagStatus;
import java.time.Instant;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The status report's JSON, which scripts read. */
class StatusReportTest {
  private static final Instant READ_AT = Instant.parse("2026-11-24T10:00:00Z");

  @Test
  void should_give_the_oldest_waiting_record_as_an_instant_and_its_age_when_the_lag_was_read() {
    LagStatus waiting =
        LagStatus.of(
            new Lag("s.lfk.sink", "s.lfk.cleanup-batches", 3, 1200, at("09:58:30"), 2), READ_AT);
    LagStatus none =
        LagStatus.of(new Lag("s.buffers.sink", "s.buffers.a.batches", 3, 0, null, 1), READ_AT);
    LagStatus ahead =
        LagStatus.of(new Lag("s.lfk.sink", "s.lfk.deletes", 3, 1, at("10:00:02"), 2), READ_AT);

    JsonNode json = HttpEndpoint.JSON.valueToTree(waiting);
    assertThat(json.get("oldestWaitingSince").asText()).isEqualTo("2026-11-24T09:58:30Z");
    assertThat(json.get("oldestWaitingSeconds").asLong()).isEqualTo(90);
    assertThat(json.has("oldestWaitingMillis")).as("a time named like a duration").isFalse();
    JsonNode nothing = HttpEndpoint.JSON.valueToTree(none);
    assertThat(nothing.get("oldestWaitingSince").isNull()).isTrue();
    assertThat(nothing.get("oldestWaitingSeconds").isNull()).isTrue();
    assertThat(ahead.oldestWaitingSeconds()).as("a broker's clock ahead of this one").isZero();
  }

  @Test
  void should_read_back_the_lag_it_serves() throws Exception {
    List<LagStatus> lag =
        List.of(
            LagStatus.of(
                new Lag("s.lfk.sink", "s.lfk.cleanup-batches", 3, 1200, at("09:58:30"), 2),
                READ_AT),
            LagStatus.of(new Lag("s.buffers.sink", "s.buffers.a.batches", 3, 0, null, 1), READ_AT));
    StatusReport report =
        new StatusReport(
            42,
            "then",
            null,
            List.of(),
            List.of(),
            false,
            List.of(),
            List.of(),
            List.of(),
            READ_AT.toString(),
            lag,
            null,
            READ_AT.toString());

    assertThat(StatusClient.read(HttpEndpoint.JSON.writeValueAsString(report), 8088).lag())
        .isEqualTo(lag);
  }

  private static long at(String time) {
    return Instant.parse("2026-11-24T" + time + "Z").toEpochMilli();
  }
}
