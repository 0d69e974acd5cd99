package dev.spillway.cli;

import static org.assertj.core.api.Assertions.assertThat;

import dev.spillway.cli.RunCommand.Only;
import java.util.EnumSet;
import org.junit.jupiter.api.Test;

/** What {@code run} says of the work it was given before it starts. */
class RunCommandTest {
  @Test
  void should_say_nothing_of_an_unconfigured_pipeline_unless_only_names_it() {
    EnumSet<Only> all = EnumSet.allOf(Only.class);
    assertThat(RunCommand.notice(all, true, false)).as("run, loose foreign keys only").isEmpty();
    assertThat(RunCommand.notice(all, false, true)).as("run, buffers only").isEmpty();
    assertThat(RunCommand.notice(all, true, true)).isEmpty();
    assertThat(RunCommand.notice(EnumSet.of(Only.buffers), false, true)).isEmpty();
    assertThat(RunCommand.notice(all, false, false)).hasValue(RunCommand.NOTHING_CONFIGURED);
    assertThat(RunCommand.notice(EnumSet.of(Only.lfk), true, true))
        .as("a configured pipeline left out")
        .hasValue(
            "--only lfk: this process does not work on the buffers the configuration sets up;"
                + " capture still reads their tables, and what it reads waits in Kafka until a run"
                + " works on them.");
    assertThat(RunCommand.notice(EnumSet.of(Only.lfk), false, true))
        .hasValueSatisfying(
            s ->
                assertThat(s)
                    .startsWith("--only names lfk, which the configuration does not set up:"));
  }
}
