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
    assertThat(KafkaClients.refusal("acks", "x")).isPresent();
    assertThat(KafkaClients.refusal("producer.acks", "x")).isPresent();
    assertThat(KafkaClients.refusal("main.consumer.auto.offset.reset", "x")).isPresent();
    assertThat(KafkaClients.refusal("restore.consumer.max.poll.records", "x")).isPresent();
    assertThat(KafkaClients.refusal("consumer.isolation.level", "x")).isPresent();
    assertThat(KafkaClients.refusal("deserialization.exception.handler", "x")).isPresent();
    assertThat(KafkaClients.refusal("default.production.exception.handler", "x")).isPresent();
    assertThat(KafkaClients.refusal("processing.exception.handler", "x")).isPresent();
    assertThat(KafkaClients.refusal("producer.partitioner.class", "x")).isPresent();
    assertThat(KafkaClients.refusal("partitioner.ignore.keys", "true")).isPresent();
    assertThat(KafkaClients.refusal("poll.ms", "500")).isPresent();
    assertThat(KafkaClients.refusal("linger.ms", "5")).isEmpty();
    assertThat(KafkaClients.refusal("consumer.fetch.min.bytes", "1024")).isEmpty();
    assertThat(KafkaClients.refusal("sasl.jaas.config", "x")).isEmpty();
    assertThat(KafkaClients.refusal("consumer.fetch.min.bytes", "1kB"))
        .hasValue(
            "is refused by Kafka: Invalid value 1kB for configuration fetch.min.bytes: Not a"
                + " number of type INT");
  }
}
