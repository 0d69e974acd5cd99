package dev.spillway.cli;

import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.List;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.ScopeType;

/**
 * {@code bin/spillway}: the entry point. Exit codes: 0 done, 1 runtime failure, 2 usage or
 * configuration error.
 */
@Command(
    name = "spillway",
    mixinStandardHelpOptions = true,
    scope = ScopeType.INHERIT,
    versionProvider = Version.class,
    description = "Background data work for PostgreSQL, run as one Kafka-driven pipeline.",
    subcommands = {
      QuickstartCommand.class,
      RunCommand.class,
      StatusCommand.class,
      LagCommand.class,
      LfkCommand.class,
      BuffersCommand.class,
      ReplayCommand.class,
      BenchCommand.class,
      CommandLine.HelpCommand.class
    })
public final class SpillwayCommand implements Runnable {
  @Option(
      names = {"-c", "--config"},
      paramLabel = "FILE",
      scope = ScopeType.INHERIT,
      description = "Configuration file (default: spillway.yml in the current directory, if any).")
  Path config;

  @Option(
      names = "--verbose",
      scope = ScopeType.INHERIT,
      description = "Show stack traces and debug logging.")
  boolean verbose;

  @CommandLine.Spec CommandLine.Model.CommandSpec spec;

  @Override
  public void run() {
    throw CommandGroup.missingCommand(spec);
  }

  public static void main(String[] args) {
    PrintWriter out = new PrintWriter(System.out, true);
    PrintWriter err = new PrintWriter(System.err, true);
    System.exit(execute(out, err, args));
  }

  /** Runs a command line with the given output and returns its exit code. */
  public static int execute(PrintWriter out, PrintWriter err, String... args) {
    return execute(new SpillwayCommand(), out, err, args);
  }

  /**
   * Runs a command line of this command and returns its exit code. An {@link Error} (a thread the
   * system would not give, memory run out) is one sentence and exit 1 too: picocli hands it on
   * rather than to the handler, and the threads already started would keep the process alive
   * without {@link #main}'s exit, which runs the shutdown hooks stopping them.
   */
  static int execute(Object command, PrintWriter out, PrintWriter err, String... args) {
    CommandLine cli = new CommandLine(command);
    cli.setOut(out);
    cli.setErr(err);
    ErrorHandler handler = new ErrorHandler();
    cli.setExecutionExceptionHandler(handler);
    cli.setParameterExceptionHandler(handler);
    cli.setExecutionStrategy(new CommandLine.RunLast());
    try {
      return cli.execute(args);
    } catch (Error e) {
      if (List.of(args).contains("--verbose")) {
        e.printStackTrace(err);
      }
      err.println(
          "Spillway stopped: " + e.getClass().getSimpleName() + ", " + ErrorHandler.sentence(e));
      err.flush();
      return ErrorHandler.FAILURE;
    }
  }
}
