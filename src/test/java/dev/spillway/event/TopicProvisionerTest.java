package dev.spillway.event;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

import java.net.ServerSocket;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class TopicProvisionerTest {
  @Test
  void should_tell_no_topic_missing_when_kafka_does_not_answer_and_not_wait_on_after() {
    // What this bounds is a hang, not a speed: closing the admin client waited for the question
    // it had given up on, up to its default.api.timeout.ms (60 s).
    assertTimeoutPreemptively(
        Duration.ofSeconds(30),
        () ->
            assertThat(
                    TopicProvisioner.missing(
                        "localhost:" + freePort(), Map.of(), List.of("t"), Duration.ofMillis(500)))
                .isEmpty());
  }

  private static int freePort() throws Exception {
    try (ServerSocket s = new ServerSocket(0)) {
      return s.getLocalPort(); // free again: nothing listens there
    }
  }

  @Test
  void should_make_topics_of_three_replicas_or_more_need_two_in_sync_to_acknowledge() {
    assertThat(TopicProvisioner.settings(false, (short) 1)).isEmpty();
    assertThat(TopicProvisioner.settings(false, (short) 2)).isEmpty();
    assertThat(TopicProvisioner.settings(false, (short) 3))
        .containsExactly(Map.entry("min.insync.replicas", "2"));
    assertThat(TopicProvisioner.settings(true, (short) 1))
        .containsOnly(Map.entry("retention.ms", "-1"), Map.entry("retention.bytes", "-1"));
    assertThat(TopicProvisioner.settings(true, (short) 5))
        .containsOnly(
            Map.entry("min.insync.replicas", "2"),
            Map.entry("retention.ms", "-1"),
            Map.entry("retention.bytes", "-1"));
    assertThat(TopicProvisioner.compactedSettings((short) 1))
        .containsOnly(Map.entry("cleanup.policy", "compact"));
    assertThat(TopicProvisioner.compactedSettings((short) 3))
        .containsOnly(
            Map.entry("cleanup.policy", "compact"), Map.entry("min.insync.replicas", "2"));
  }

  @Test
  void should_say_in_one_sentence_that_no_broker_answered() throws Exception {
    int port;
    try (ServerSocket s = new ServerSocket(0)) {
      port = s.getLocalPort(); // free again: nothing listens there
    }
    String bootstrap = "localhost:" + port;
    // Kafka's own patience, shortened: 60 s unless set.
    Map<String, String> impatient =
        Map.of("default.api.timeout.ms", "2000", "request.timeout.ms", "1000");

    assertThatThrownBy(
            () -> TopicProvisioner.ensure(bootstrap, impatient, List.of("t"), 1, (short) 1))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageStartingWith(
            "Spillway cannot reach Kafka at " + bootstrap + ": no broker answered (");
    assertThatThrownBy(() -> TopicProvisioner.exists(bootstrap, impatient, "t"))
        .hasMessageStartingWith(
            "Spillway cannot reach Kafka at " + bootstrap + ": no broker answered (");
  }
}
