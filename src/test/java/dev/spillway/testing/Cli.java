package dev.spillway.testing;

import dev.spillway.cli.SpillwayCommand;
import java.io.PrintWriter;
import java.io.StringWriter;

/** Runs a {@code spillway} command line in-process and captures what it printed. */
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
}
