package dev.spillway.cli;

import dev.spillway.config.SpillwayConfig;
import dev.spillway.runtime.SpillwayRuntime;
import java.time.Clock;
import java.util.List;
import java.util.Set;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.ParentCommand;
import picocli.CommandLine.Spec;

/** {@code spillway run}: the long-running worker. */
@Command(
    name = "run",
    description = "Run Spillway until stopped: capture, pipelines, metrics and status.")
final class RunCommand implements Callable<Integer> {
  @ParentCommand SpillwayCommand root;
  @Spec CommandSpec spec;

  @Override
  public Integer call() throws Exception {
    SpillwayConfig config = Launch.config(root);
    SpillwayRuntime runtime = SpillwayRuntime.start(config, Set.of(), Clock.systemUTC());
    try {
      runtime.startCapture(List.of());
    } catch (RuntimeException | InterruptedException e) {
      runtime.close();
      throw e;
    }
    return UntilStopped.await(runtime, spec.commandLine().getOut());
  }
}
