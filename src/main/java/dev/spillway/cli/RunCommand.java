package dev.spillway.cli;

import dev.spillway.buffers.BufferPipeline;
import dev.spillway.capture.CaptureRoute;
import dev.spillway.config.SpillwayConfig;
import dev.spillway.lfk.LfkConfig;
import dev.spillway.lfk.LfkPipeline;
import dev.spillway.runtime.SpillwayRuntime;
import java.io.PrintWriter;
import java.sql.SQLException;
import java.time.Clock;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParentCommand;
import picocli.CommandLine.Spec;

/** {@code spillway run}: the long-running worker. */
@Command(
    name = "run",
    description = "Run Spillway until stopped: capture, pipelines, metrics and status.")
final class RunCommand implements Callable<Integer> {
  /** The pipelines {@code --only} can name. */
  enum Only {
    lfk,
    buffers
  }

  @ParentCommand SpillwayCommand root;
  @Spec CommandSpec spec;

  @Option(
      names = "--only",
      split = ",",
      paramLabel = "PIPELINE",
      description =
          "Run only these pipelines (${COMPLETION-CANDIDATES}); default: every configured one.")
  Set<Only> only = EnumSet.allOf(Only.class);

  @Override
  public Integer call() throws Exception {
    SpillwayConfig config = Launch.config(root);
    // Every section is read before anything starts, so a bad one costs nothing.
    LfkConfig lfk = LfkConfig.from(config);
    BufferPipeline buffers = BufferPipeline.fromConfig(config);
    PrintWriter out = spec.commandLine().getOut();
    SpillwayRuntime runtime = SpillwayRuntime.start(config, Set.of(), Clock.systemUTC());
    try {
      List<CaptureRoute> routes = new ArrayList<>();
      if (only.contains(Only.lfk) && lfk.enabled()) {
        LfkPipeline pipeline =
            LfkStartup.start(runtime, lfk.settings(), lfk.definitions(), config::databaseOf, out);
        routes.addAll(pipeline.routes(runtime.topics()));
      }
      if (only.contains(Only.buffers) && !buffers.isEmpty()) {
        buffers.start(runtime, Clock.systemUTC());
        routes.addAll(buffers.routes(runtime.topics()));
      }
      runtime.startCapture(routes);
    } catch (RuntimeException | InterruptedException | SQLException e) {
      runtime.close();
      throw e;
    }
    return UntilStopped.await(runtime, out);
  }
}
