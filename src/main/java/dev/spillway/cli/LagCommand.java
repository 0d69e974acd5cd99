package dev.spillway.cli;

import dev.spillway.config.SpillwayConfig;
import dev.spillway.ops.ConsumerLag;
import dev.spillway.ops.StatusReport.LagStatus;
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

  @Override
  public Integer call() throws Exception {
    SpillwayConfig config = Launch.config(root);
    String bootstrap =
        Launch.kafka(config, WorkingDirectory.running(config.workingDir()), "the consumer groups");
    List<ConsumerLag.Lag> read =
        ConsumerLag.read(bootstrap, config.kafka().properties(), config.kafka().topicPrefix());
    Instant now = Instant.now();
    List<LagStatus> lags = read.stream().map(l -> LagStatus.of(l, now)).toList();
    PrintWriter out = spec.commandLine().getOut();
    out.print(json ? JsonOut.of(lags) + System.lineSeparator() : StatusText.lag(lags, now));
    out.flush();
    return ErrorHandler.OK;
  }
}
