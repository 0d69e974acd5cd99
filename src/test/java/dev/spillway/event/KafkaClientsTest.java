package dev.spillway.event;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.Map;
import org.junit.jupiter.api.Test;

class KafkaClientsTest {
  @Test
  void should_let_configured_properties_change_defaults_but_not_what_spillway_sets() {
    var p =
        KafkaClients.properties(
            Map.of("linger.ms", 1, "compression.type", "lz4"),
            Map.of("linger.ms", "20", "security.protocol", "SSL", "acks", "0"),
            Map.of("acks", "all"));

    assertThat(p)
        .containsEntry("linger.ms", "20")
        .containsEntry("compression.type", "lz4")
        .containsEntry("security.protocol", "SSL")
        .containsEntry("acks", "all");
  }

  @Test
  void should_know_the_properties_spillway_sets_behind_any_client_prefix() {
    assertThat(KafkaClients.setBySpillway("acks")).isTrue();
    assertThat(KafkaClients.setBySpillway("producer.acks")).isTrue();
    assertThat(KafkaClients.setBySpillway("main.consumer.auto.offset.reset")).isTrue();
    assertThat(KafkaClients.setBySpillway("restore.consumer.max.poll.records")).isTrue();
    assertThat(KafkaClients.setBySpillway("consumer.isolation.level")).isTrue();
    assertThat(KafkaClients.setBySpillway("linger.ms")).isFalse();
    assertThat(KafkaClients.setBySpillway("consumer.fetch.min.bytes")).isFalse();
    assertThat(KafkaClients.setBySpillway("sasl.jaas.config")).isFalse();
  }
}
