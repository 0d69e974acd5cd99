package dev.spillway.cli;

import dev.spillway.config.SpillwayConfig;
import dev.spillway.ops.StatusClient;
import dev.spillway.ops.StatusReport;
import dev.spillway.ops.StatusText;
import dev.spillway.runtime.RuntimeInfo;
import dev.spillway.runtime.WorkingDirectory;
import java.io.PrintWriter;
import java.time.Instant;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParentCommand;
import picocli.CommandLine.Spec;

/** {@code spillway status}: what the running process does, from its status API. */
@Command(
    name = "status",
    description = "Show what runs, captured changes per table and WAL held by each slot.")
final class StatusCommand implements Callable<Integer> {
  @ParentCommand SpillwayCommand root;
  @Spec CommandSpec spec;

  @Option(names = "--json", description = "Print the status report as JSON.")
  boolean json;

  @Override
  public Integer call() throws Exception {
    SpillwayConfig config = Launch.config(root);
    RuntimeInfo info =
        WorkingDirectory.running(config.workingDir())
            .orElseThrow(
                () ->
                    new IllegalStateException(
                        "Spillway is not running in " + config.workingDir() + "."));
    StatusReport report = StatusClient.fetch(info.httpPort());
    PrintWriter out = spec.commandLine().getOut();
    if (json) {
      out.println(JsonOut.of(report));
    } else {
      out.print(StatusText.render(report, Instant.now()));
    }
    out.flush();
    return report.failure() == null ? ErrorHandler.OK : ErrorHandler.FAILURE;
  }
}
