package dev.spillway.lfk;

import static org.assertj.core.api.Assertions.assertThat;

import dev.spillway.event.CleanupBatch;
import dev.spillway.event.EventSerdes;
import dev.spillway.event.TableName;
import dev.spillway.sink.Outcome;
import dev.spillway.sink.SinkRecord;
import dev.spillway.sink.SinkSettings;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class LfkCleanupTest {
  @Test
  void should_dead_letter_a_batch_whose_parent_no_definition_names() throws Exception {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    LfkCleanup cleanup =
        new LfkCleanup(
            List.of(), LfkSettings.defaults(SinkSettings.defaults()), new LfkMetrics(registry));
    byte[] batch =
        EventSerdes.encode(
            new CleanupBatch("main", TableName.parse("labels"), List.of("4", "5"), 1_000_000L));

    // No database is asked: the run context is not used.
    Outcome outcome = cleanup.execute(new SinkRecord("t", 0, 7, null, batch, 1, Map.of()), null);

    assertThat(outcome).isInstanceOf(Outcome.PermanentFailure.class);
    assertThat(((Outcome.PermanentFailure) outcome).error())
        .hasMessage(
            "No loose foreign key of this configuration has public.labels as its parent; nothing"
                + " was cleaned. Once one has, bin/spillway replay lfk hands the batch back.");
    assertThat(registry.find(LfkMetrics.PROCESSED).counter())
        .as("nothing counted as processed")
        .isNull();
  }
}
