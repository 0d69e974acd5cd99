package dev.spillway.testing;

import dev.spillway.cli.SpillwayCommand;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Runs a {@code spillway} command line in-process and captures what it printed, or starts one in a
 * JVM of its own.
 */
public final class Cli {
  private Cli() {}

  /** The outcome of one command line. */
  public record Result(int exitCode, String out, String err) {}

  public static Result run(String... args) {
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    int code;
    try (PrintWriter o = new PrintWriter(out, true);
        PrintWriter e = new PrintWriter(err, true)) {
      code = SpillwayCommand.execute(o, e, args);
    }
    return new Result(code, out.toString(), err.toString());
  }

  /**
   * A {@code spillway} command line in a JVM of its own, on the tests' class path; what it prints,
   * standard error included, goes to {@code output}.
   */
  public static ProcessBuilder process(ProcessBuilder.Redirect output, String... args) {
    return process(System.getProperty("java.class.path"), output, args);
  }

  /** The same on {@code classPath}: the built jar, say, as {@code bin/spillway} runs it. */
  public static ProcessBuilder process(
      String classPath, ProcessBuilder.Redirect output, String... args) {
    List<String> command = new ArrayList<>();
    command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    command.add("-cp");
    command.add(classPath);
    command.add(SpillwayCommand.class.getName());
    command.addAll(List.of(args));
    return new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(output);
  }
}
