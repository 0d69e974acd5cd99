package dev.spillway.streams;

import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

import dev.spillway.testing.EmbeddedInfra;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Starting a Streams application on the shared embedded Kafka. */
class StreamsAppIT {
  @TempDir Path dir;

  @Test
  void should_say_why_an_application_failing_as_it_starts_failed_without_waiting_a_minute()
      throws Exception {
    String run = "failing-" + UUID.randomUUID();
    String bootstrap = EmbeddedInfra.get().bootstrapServers();
    try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
      admin.createTopics(List.of(new NewTopic(run + ".in", 1, (short) 1))).all().get();
    }
    Topology t = new Topology();
    t.addSource("in", new ByteArrayDeserializer(), new ByteArrayDeserializer(), run + ".in");
    t.addProcessor("refusing", Refusing::new, "in");

    // What this bounds is a hang, not a speed: the start waited its full minute, then said only
    // that it had not started.
    assertTimeoutPreemptively(
        Duration.ofSeconds(45),
        () ->
            assertThatThrownBy(
                    () ->
                        StreamsApp.start(
                            run,
                            t,
                            bootstrap,
                            Map.of(),
                            dir,
                            Duration.ofMillis(100),
                            Duration.ofMillis(50),
                            (short) 1))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageStartingWith("Streams application " + run + " failed: ")
                .hasMessageContaining("no grant to write here"));
  }

  /** A processor whose task cannot start, as one denied what it needs. */
  private static final class Refusing implements Processor<byte[], byte[], byte[], byte[]> {
    @Override
    public void init(ProcessorContext<byte[], byte[]> context) {
      throw new IllegalStateException("no grant to write here");
    }

    @Override
    public void process(Record<byte[], byte[]> r) {}
  }
}
