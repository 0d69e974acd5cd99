package dev.spillway.ops;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** Where a dead letter came from, read back from its {@code spillway.source} header. */
class DeadLetterReplayTest {

  @Test
  void should_read_the_topic_of_a_position_whatever_dashes_the_topic_holds() {
    assertThat(DeadLetterReplay.topicOf("spillway.lfk.cleanup-batches-3@120"))
        .isEqualTo("spillway.lfk.cleanup-batches");
    assertThat(DeadLetterReplay.topicOf("my-app.buffers.a-b.batches-0@0"))
        .isEqualTo("my-app.buffers.a-b.batches");
  }

  @Test
  void should_not_read_a_topic_from_what_is_no_position() {
    assertThat(DeadLetterReplay.topicOf("unknown")).isNull();
    assertThat(DeadLetterReplay.topicOf("topic@5")).isNull();
    assertThat(DeadLetterReplay.topicOf("topic-x@5")).isNull();
    assertThat(DeadLetterReplay.topicOf("topic-@5")).isNull();
    assertThat(DeadLetterReplay.topicOf("-1@5")).isNull();
  }
}
