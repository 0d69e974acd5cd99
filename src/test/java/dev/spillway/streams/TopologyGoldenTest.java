package dev.spillway.streams;

import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.spillway.testing.TopologyGolden;
import java.nio.file.Files;
import java.nio.file.Path;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Named;
import org.apache.kafka.streams.kstream.Produced;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class TopologyGoldenTest {
  private static Topology topology(String sink) {
    StreamsBuilder b = new StreamsBuilder();
    b.<String, String>stream("in", Consumed.as("source-in"))
        .mapValues(v -> v, Named.as("copy"))
        .to(sink, Produced.as("sink-out"));
    return b.build();
  }

  @Test
  void should_accept_a_topology_equal_to_its_committed_description(@TempDir Path dir)
      throws Exception {
    Path file = dir.resolve("t.txt");
    Files.writeString(file, topology("out").describe().toString().strip() + "\n");
    assertThatCode(() -> TopologyGolden.assertMatches(topology("out"), file))
        .doesNotThrowAnyException();
  }

  @Test
  void should_fail_when_the_topology_differs_from_its_committed_description(@TempDir Path dir)
      throws Exception {
    Path file = dir.resolve("t.txt");
    Files.writeString(file, topology("out").describe().toString());
    assertThatThrownBy(() -> TopologyGolden.assertMatches(topology("elsewhere"), file))
        .isInstanceOf(AssertionError.class)
        .hasMessageContaining("regenerate it with mvn verify -Dspillway.topology.update=true");
  }

  @Test
  void should_fail_when_the_description_file_is_missing(@TempDir Path dir) {
    assertThatThrownBy(() -> TopologyGolden.assertMatches(topology("out"), dir.resolve("none.txt")))
        .isInstanceOf(AssertionError.class)
        .hasMessageContaining("is missing");
  }
}
