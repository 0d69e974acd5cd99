package dev.spillway.cli;

import dev.spillway.config.SpillwayConfig;
import dev.spillway.ops.ConsumerLag;
import dev.spillway.ops.ConsumerLag.Lag;
import dev.spillway.ops.StatusText;
import dev.spillway.runtime.WorkingDirectory;
import java.io.PrintWriter;
import java.time.Instant;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParentCommand;
import picocli.CommandLine.Spec;

/** {@code spillway lag}: how far each of Spillway's consumer groups is behind. */
@Command(
    name = "lag",
    description =
        "Show how far each of Spillway's consumer groups is behind: records not yet committed per"
            + " topic and the age of the oldest.")
final class LagCommand implements Callable<Integer> {
  @ParentCommand SpillwayCommand root;
  @Spec CommandSpec spec;

  @Option(names = "--json", description = "Print the lag as JSON.")
  boolean json;

  /** A group on a topic in {@code --json}: the oldest waiting record's age in seconds. */
  record JsonLag(
      String group,
      String topic,
      int partitions,
      long lag,
      Long oldestWaitingSeconds,
      int members) {}

  @Override
  public Integer call() throws Exception {
    SpillwayConfig config = Launch.config(root);
    String bootstrap =
        Launch.kafka(config, WorkingDirectory.running(config.workingDir()), "the consumer groups");
    List<Lag> lags =
        ConsumerLag.read(bootstrap, config.kafka().properties(), config.kafka().topicPrefix());
    Instant now = Instant.now();
    PrintWriter out = spec.commandLine().getOut();
    if (json) {
      out.println(
          JsonOut.of(
              lags.stream()
                  .map(
                      l ->
                          new JsonLag(
                              l.group(),
                              l.topic(),
                              l.partitions(),
                              l.lag(),
                              l.waitedSeconds(now),
                              l.members()))
                  .toList()));
    } else {
      out.print(StatusText.lag(lags, now));
    }
    out.flush();
    return ErrorHandler.OK;
  }
}
