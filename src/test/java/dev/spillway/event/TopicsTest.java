package dev.spillway.event;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

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

  @Test
  void should_have_run_make_the_dead_letter_topics_of_the_pipelines_it_runs_alone() {
    assertThat(topics.deadLetterTopics())
        .as("none for pipelines no command runs: kept for ever in the user's Kafka, read by none")
        .containsExactly("spillway.lfk.dlq", "spillway.buffers.dlq");
  }

  @Test
  void should_name_a_store_changelog_as_kafka_streams_does() {
    assertThat(topics.changelog(Pipeline.LFK, "batcher", "lfk-pending"))
        .isEqualTo("spillway.lfk.batcher-lfk-pending-changelog");
  }

  @Test
  void should_give_no_streams_application_the_id_of_a_consumer_group_of_its_own() {
    assertThat(topics.streamsApplication(Pipeline.BUFFERS, "activity"))
        .isNotIn(topics.sinkGroup(Pipeline.BUFFERS), topics.delayGroup(Pipeline.BUFFERS));
    for (String group : new String[] {"sink", "delay"}) {
      assertThat(Topics.namesOwnGroup(group)).isTrue();
      assertThatThrownBy(() -> topics.streamsApplication(Pipeline.BUFFERS, group))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("spillway.buffers." + group);
    }
  }
}
