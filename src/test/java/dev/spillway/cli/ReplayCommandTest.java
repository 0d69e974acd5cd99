package dev.spillway.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.spillway.cli.ReplayCommand.JsonLetter;
import dev.spillway.ops.DeadLetterReplay;
import dev.spillway.ops.DeadLetterReplay.Fate;
import dev.spillway.ops.DeadLetterReplay.Letter;
import java.time.Clock;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.List;
import org.junit.jupiter.api.Test;
import picocli.CommandLine.TypeConversionException;

/** What {@code spillway replay} accepts as a time and how it reports dead letters. */
class ReplayCommandTest {
  private static final Instant NOW = Instant.parse("2026-11-24T12:00:00Z");
  private final ReplayCommand.SinceConverter since =
      new ReplayCommand.SinceConverter(Clock.fixed(NOW, ZoneOffset.UTC));

  @Test
  void should_take_an_instant_or_a_time_ago_as_since() {
    assertThat(since.convert("2026-11-24T08:30:00Z")).isEqualTo("2026-11-24T08:30:00Z");
    assertThat(since.convert("2h")).isEqualTo("2026-11-24T10:00:00Z");
    assertThat(since.convert("1d")).isEqualTo("2026-11-23T12:00:00Z");
    assertThat(since.convert("PT30M")).isEqualTo("2026-11-24T11:30:00Z");
  }

  @Test
  void should_list_a_dead_letter_with_a_many_lined_error_on_one_line() {
    assertThat(
            ReplayCommand.because(
                "PSQLException: ERROR: column \"x\" does not exist\n  Hint: Perhaps you meant"
                    + " \"y\".\r\n  Position: 8\n"))
        .isEqualTo(
            "  (PSQLException: ERROR: column \"x\" does not exist Hint: Perhaps you meant \"y\"."
                + " Position: 8)");
    assertThat(ReplayCommand.because("")).isEmpty();
  }

  @Test
  void should_say_what_a_stopped_replay_handed_over_and_what_it_could_not_record() {
    assertThat(ReplayCommand.stopped("p.lfk.dlq", 0, 0))
        .isEqualTo("Replay stopped before the end of p.lfk.dlq: no batch was handed over.");
    assertThat(ReplayCommand.stopped("p.lfk.dlq", 1, 0))
        .isEqualTo(
            "Replay stopped before the end of p.lfk.dlq: 1 batch handed over and recorded as"
                + " replayed, so replaying again hands over the rest.");
    assertThat(ReplayCommand.stopped("p.lfk.dlq", 0, 1))
        .isEqualTo(
            "Replay stopped before the end of p.lfk.dlq: no batch recorded as replayed; 1 batch"
                + " sent is not recorded as replayed (Kafka did not answer within 20 s, or refused"
                + " its record), so replaying again hands over the rest and may hand that one over"
                + " twice, with the same group ids.");
    assertThat(ReplayCommand.stopped("p.lfk.dlq", 2, 3))
        .isEqualTo(
            "Replay stopped before the end of p.lfk.dlq: 2 batches handed over and recorded as"
                + " replayed; 3 batches sent are not recorded as replayed (Kafka did not answer"
                + " within 20 s, or refused their record), so replaying again hands over the rest"
                + " and may hand those over twice, with the same group ids.");
  }

  @Test
  void should_say_what_kafka_took_did_not_record_and_did_not_take_of_a_replay() {
    assertThat(
            ReplayCommand.incomplete(
                new DeadLetterReplay.IncompleteReplay(3, 0, 1, new RuntimeException("timed out"))))
        .isEqualTo(
            "Kafka took 3 replayed batches but could not record 1 of them as replayed (timed"
                + " out); they run, and replaying again hands that one over twice, with the same"
                + " group ids.");
    assertThat(
            ReplayCommand.incomplete(
                new DeadLetterReplay.IncompleteReplay(3, 2, 3, new RuntimeException("timed out"))))
        .isEqualTo(
            "Kafka took 3 replayed batches but could not record them as replayed (timed out);"
                + " they run, and replaying again hands them over twice, with the same group ids."
                + " It did not take 2 more, which replaying again hands over.");
    assertThat(
            ReplayCommand.incomplete(
                new DeadLetterReplay.IncompleteReplay(1, 2, 0, new RuntimeException("refused"))))
        .isEqualTo(
            "Kafka did not take 2 of 3 replayed batches (refused); the 1 it took runs and is"
                + " recorded as replayed, so replaying again hands over only the rest.");
  }

  @Test
  void should_refuse_a_since_that_is_no_time_in_one_sentence() {
    assertThatThrownBy(() -> since.convert("last tuesday"))
        .isInstanceOf(TypeConversionException.class)
        .hasMessage(
            "'last tuesday' is neither an instant such as 2026-11-24T08:00:00Z nor a time ago"
                + " such as 30m, 2h or 1d");
    assertThatThrownBy(() -> since.convert("2026-11-24"))
        .isInstanceOf(TypeConversionException.class);
    assertThatThrownBy(() -> since.convert("1960-01-01T00:00:00Z"))
        .isInstanceOf(TypeConversionException.class)
        .hasMessage(
            "'1960-01-01T00:00:00Z' is before 1970-01-01T00:00:00Z, where Kafka's record times"
                + " begin");
    assertThatThrownBy(() -> since.convert("30000d"))
        .isInstanceOf(TypeConversionException.class)
        .hasMessageStartingWith("'30000d' is before 1970");
    assertThatThrownBy(() -> since.convert("400000000000d"))
        .as("before any instant Java has")
        .isInstanceOf(TypeConversionException.class)
        .hasMessageStartingWith("'400000000000d' is before 1970");
  }

  /** A batch an earlier replay handed over, skipped this time. */
  private static final Letter SKIPPED =
      new Letter(
          "s.buffers.dlq-0@1",
          Instant.parse("2026-11-24T09:00:00Z"),
          "BufferExhaustedException: answered 503",
          "activity",
          2,
          null,
          Fate.REPLAYED_BEFORE,
          null,
          Instant.parse("2026-11-24T09:30:00Z"));

  @Test
  void should_list_what_was_replayed_and_what_was_left() {
    List<Letter> letters =
        List.of(
            new Letter(
                "s.buffers.dlq-0@3",
                Instant.parse("2026-11-24T10:00:00Z"),
                "BufferExhaustedException: answered 503",
                "activity",
                1,
                "s.buffers.activity.batches",
                Fate.REPLAYED,
                null,
                null),
            SKIPPED,
            new Letter(
                "s.buffers.dlq-1@0",
                Instant.parse("2026-11-24T10:00:01Z"),
                "MalformedBufferEvent: no key",
                null,
                0,
                null,
                Fate.LEFT,
                "not a batch: it failed on s.buffers.activity.events-0@9, before batching",
                null));

    assertThat(ReplayCommand.render("s.buffers.dlq", letters, "events", false))
        .isEqualTo(
            """
            Replayed 1 batch (1 event) from s.buffers.dlq:
              s.buffers.dlq-0@3  2026-11-24T10:00:00Z  activity  1 event  -> s.buffers.activity.batches  (BufferExhaustedException: answered 503)
            Skipped 1 batch an earlier replay handed over (--again hands them over once more):
              s.buffers.dlq-0@1  2026-11-24T09:00:00Z  activity  2 events  replayed at 2026-11-24T09:30:00Z
            Left 1 dead letter that cannot be replayed:
              s.buffers.dlq-1@0  2026-11-24T10:00:01Z  not a batch: it failed on s.buffers.activity.events-0@9, before batching  (MalformedBufferEvent: no key)
            """);
    assertThat(ReplayCommand.render("s.buffers.dlq", List.of(), "events", false))
        .isEqualTo("No dead letters to replay in s.buffers.dlq.\n");
  }

  @Test
  void should_say_in_json_when_an_earlier_replay_handed_a_skipped_batch_over() throws Exception {
    JsonNode json =
        new ObjectMapper().readTree(new ObjectMapper().writeValueAsString(JsonLetter.of(SKIPPED)));
    assertThat(json.get("fate").asText()).isEqualTo("replayed_before");
    assertThat(json.get("replayedAt").asText()).isEqualTo("2026-11-24T09:30:00Z");
    assertThat(json.get("failedAt").asText()).isEqualTo("2026-11-24T09:00:00Z");
    assertThat(json.get("left").isNull()).isTrue();
    assertThat(json.get("sentTo").isNull()).isTrue();
  }
}
