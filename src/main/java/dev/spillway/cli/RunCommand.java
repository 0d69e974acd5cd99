package dev.spillway.cli;

import dev.spillway.buffers.BufferPipeline;
import dev.spillway.capture.CaptureRoute;
import dev.spillway.config.SpillwayConfig;
import dev.spillway.runtime.SpillwayRuntime;
import java.sql.SQLException;
import java.time.Clock;
import java.util.ArrayList;
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
    BufferPipeline buffers = BufferPipeline.fromConfig(config);
    SpillwayRuntime runtime = SpillwayRuntime.start(config, Set.of(), Clock.systemUTC());
    try {
      buffers.start(runtime, Clock.systemUTC());
      List<CaptureRoute> routes = new ArrayList<>(buffers.routes(runtime.topics()));
      runtime.startCapture(routes);
    } catch (RuntimeException | InterruptedException | SQLException e) {
      runtime.close();
      throw e;
    }
    return UntilStopped.await(runtime, spec.commandLine().getOut());
  }
}
