package dev.spillway.event;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class TopicsTest {
  private final Topics topics = new Topics("spillway");

  @Test
  void should_own_the_names_of_its_pipelines_and_not_those_of_a_longer_prefix() {
    assertThat(topics.owns(topics.sinkGroup(Pipeline.LFK))).isTrue();
    assertThat(topics.owns(topics.bufferBatches("activity"))).isTrue();
    assertThat(topics.owns(topics.streamsApplication(Pipeline.BUFFERS, "activity"))).isTrue();
    assertThat(topics.owns(new Topics("spillway.staging").sinkGroup(Pipeline.LFK))).isFalse();
    assertThat(topics.owns("spillway.capture.offsets")).isFalse();
    assertThat(topics.owns("other.spillway.lfk.sink")).isFalse();
  }
}
