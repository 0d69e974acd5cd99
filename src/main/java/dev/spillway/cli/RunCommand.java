package dev.spillway.cli;

import dev.spillway.buffers.BufferPipeline;
import dev.spillway.buffers.BufferSettings;
import dev.spillway.capture.CaptureRoute;
import dev.spillway.config.SpillwayConfig;
import dev.spillway.lfk.LfkConfig;
import dev.spillway.runtime.SpillwayRuntime;
import dev.spillway.runtime.WorkingDirectory;
import java.io.PrintWriter;
import java.sql.SQLException;
import java.time.Clock;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Optional;
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

  /** What {@code run} says when the configuration gives it no work. */
  static final String NOTHING_CONFIGURED =
      "No pipeline is configured: Spillway runs with nothing to do. Add loose foreign keys"
          + " (loose-foreign-keys: with file: or definitions:) or buffers: to the configuration.";

  @ParentCommand SpillwayCommand root;
  @Spec CommandSpec spec;

  @Option(
      names = "--only",
      split = ",",
      paramLabel = "PIPELINE",
      description =
          "Work only on these pipelines (${COMPLETION-CANDIDATES}); default: every configured"
              + " one. Every configured pipeline's tables are still captured.")
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
      List<CaptureRoute> routes = start(runtime, only, lfk, buffers, out);
      if (!routes.isEmpty() && (config.embeddedDatabases() || config.kafka().embedded())) {
        // Checked and about to capture: its slot, topics and consumer groups are this run's, which
        // the quickstart keeps out of.
        WorkingDirectory.markEmbeddedRun(config.workingDir());
      }
      runtime.startCapture(routes);
    } catch (RuntimeException
        | Error
        | InterruptedException
        | SQLException
        | java.io.IOException e) {
      runtime.close();
      throw e;
    }
    return UntilStopped.await(runtime, out);
  }

  /**
   * What {@code run} says before it starts about the work it was given: nothing configured, or a
   * pipeline {@code --only} names that is not (the default names every pipeline, configured or not,
   * and says nothing of those left unconfigured).
   */
  static Optional<String> notice(Set<Only> only, boolean lfk, boolean buffers) {
    if (!lfk && !buffers) {
      return Optional.of(NOTHING_CONFIGURED);
    }
    boolean narrowed = !only.containsAll(EnumSet.allOf(Only.class));
    if (narrowed
        && ((only.contains(Only.lfk) && !lfk) || (only.contains(Only.buffers) && !buffers))) {
      return Optional.of(onlyUnconfigured(only));
    }
    List<String> leftOut = new ArrayList<>();
    if (lfk && !only.contains(Only.lfk)) {
      leftOut.add("loose foreign keys");
    }
    if (buffers && !only.contains(Only.buffers)) {
      leftOut.add("buffers");
    }
    if (!leftOut.isEmpty()) {
      return Optional.of(
          "--only "
              + String.join(",", only.stream().map(Only::name).toList())
              + ": this process does not work on the "
              + String.join(" or the ", leftOut)
              + " the configuration sets up; capture still reads their tables, and what it reads"
              + " waits in Kafka until a run works on them.");
    }
    return Optional.empty();
  }

  /**
   * What {@code run --only} says when it names a pipeline the configuration does not set up while
   * another is: it works on none of them here, though capture still reads the others' tables.
   */
  static String onlyUnconfigured(Set<Only> only) {
    return "--only names "
        + String.join(",", only.stream().map(Only::name).toList())
        + ", which the configuration does not set up: this process works only on what it names and is set up; capture still reads every"
        + " configured pipeline's tables, and what it reads for the others waits in Kafka until"
        + " a run works on them.";
  }

  /**
   * Starts the pipelines {@code only} names and returns what capture must read: the tables of every
   * configured pipeline, started or not. A pipeline left out stops being worked on, not captured:
   * what happens to its tables meanwhile waits in Kafka until it runs again, where a capture
   * narrowed to the others would pass over it for good.
   */
  static List<CaptureRoute> start(
      SpillwayRuntime runtime,
      Set<Only> only,
      LfkConfig lfk,
      BufferPipeline buffers,
      PrintWriter out)
      throws InterruptedException, SQLException {
    List<CaptureRoute> routes = new ArrayList<>();
    notice(only, lfk.enabled(), !buffers.isEmpty())
        .ifPresent(
            line -> {
              out.println(line);
              out.flush();
            });
    // Buffers are checked before the loose-foreign-key pipeline starts (its definitions are
    // checked first thing there), so a mistake in either stops the start before anything runs.
    Clock clock = Clock.systemUTC();
    BufferPipeline.Checked checked = null;
    if (!buffers.isEmpty() && only.contains(Only.buffers)) {
      checked = buffers.check(runtime, clock);
      // Its handlers closed once the sink has stopped, or should a later start fail.
      runtime.closeWith(checked);
    } else if (!buffers.isEmpty()) {
      buffers.checkTables(runtime); // held back, but their inserts are captured
    }
    LfkStartup.warnUnrouted(
        runtime.config(),
        lfk.definitions(),
        // A buffer naming another database than tables: gives its table is not placed by it.
        buffers.buffers().stream()
            .filter(b -> b.database().equals(runtime.config().databaseOf(b.table().toString())))
            .map(BufferSettings::table)
            .toList());
    if (lfk.enabled()) {
      routes.addAll(
          only.contains(Only.lfk)
              ? LfkStartup.start(
                      runtime, lfk.settings(), lfk.definitions(), runtime.config()::databaseOf, out)
                  .routes(runtime.topics())
              : LfkStartup.routes(runtime, lfk.definitions(), runtime.config()::databaseOf, out));
    }
    if (!buffers.isEmpty()) {
      if (checked != null) {
        buffers.start(runtime, checked, clock);
      }
      routes.addAll(buffers.routes(runtime.topics()));
    }
    return routes;
  }
}
