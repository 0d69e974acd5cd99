package dev.spillway.streams;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.streams.StreamsConfig;
import org.junit.jupiter.api.Test;

class StreamsAppTest {
  private static StreamsConfig config(Map<String, String> configured) {
    return new StreamsConfig(
        StreamsApp.properties(
            "app", "k:9092", configured, Path.of("state"), Duration.ofMillis(100), (short) 1));
  }

  @Test
  void should_give_its_producers_spillway_s_linger_over_the_streams_default() {
    Map<String, Object> producer = config(Map.of()).getProducerConfigs("c");

    assertThat(producer.get(ProducerConfig.LINGER_MS_CONFIG)).hasToString("5");
    assertThat(producer.get(ProducerConfig.ACKS_CONFIG)).isEqualTo("all");
  }

  @Test
  void should_let_configured_properties_tune_its_producers() {
    assertThat(
            config(Map.of("linger.ms", "20"))
                .getProducerConfigs("c")
                .get(ProducerConfig.LINGER_MS_CONFIG))
        .hasToString("20");
    assertThat(
            config(Map.of("linger.ms", "20", "producer.linger.ms", "50"))
                .getProducerConfigs("c")
                .get(ProducerConfig.LINGER_MS_CONFIG))
        .hasToString("50");
  }
}
