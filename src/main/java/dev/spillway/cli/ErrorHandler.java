package dev.spillway.cli;

import dev.spillway.capture.CaptureSetupException;
import dev.spillway.config.ConfigException;
import dev.spillway.support.Causes;
import dev.spillway.support.Slips;
import java.io.PrintWriter;
import java.nio.file.AccessDeniedException;
import java.nio.file.DirectoryNotEmptyException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.FileSystemException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.NotDirectoryException;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Optional;
import org.apache.kafka.common.KafkaException;
import picocli.CommandLine;
import picocli.CommandLine.IExecutionExceptionHandler;
import picocli.CommandLine.IParameterExceptionHandler;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.ParseResult;
import picocli.CommandLine.UnmatchedArgumentException;

/**
 * Maps every failure to an exit code and one sentence on stderr: 2 for usage and configuration
 * errors (including a source database not set up for capture), 1 for anything else. Stack traces
 * only with {@code --verbose}.
 */
final class ErrorHandler implements IExecutionExceptionHandler, IParameterExceptionHandler {
  static final int OK = 0;
  static final int FAILURE = 1;
  static final int USAGE = 2;

  @Override
  public int handleExecutionException(Exception e, CommandLine cli, ParseResult parsed) {
    PrintWriter err = cli.getErr();
    Throwable cause = configurationCause(e);
    if (verbose(parsed)) {
      e.printStackTrace(err);
    }
    if (cause != null) {
      err.println(cause.getMessage());
      err.flush();
      return USAGE;
    }
    err.println(sentence(e));
    err.flush();
    return FAILURE;
  }

  @Override
  public int handleParseException(ParameterException e, String[] args) {
    PrintWriter err = e.getCommandLine().getErr();
    String message = message(e);
    err.println(
        (message.endsWith(".") ? message.substring(0, message.length() - 1) : message)
            + " (see '"
            + e.getCommandLine().getCommandSpec().qualifiedName()
            + " --help').");
    err.flush();
    return USAGE;
  }

  /** picocli's message, or, for a word given to a group of commands, that it names none. */
  private static String message(ParameterException e) {
    CommandSpec spec = e.getCommandLine().getCommandSpec();
    if (e instanceof UnmatchedArgumentException u
        && !spec.subcommands().isEmpty()
        && !u.getUnmatched().isEmpty()
        && !u.getUnmatched().get(0).startsWith("-")) {
      return CommandGroup.unknownCommand(spec, u.getUnmatched().get(0));
    }
    if (e instanceof UnmatchedArgumentException u && u.isUnknownOption()) {
      // picocli lists every word left over ('--olny', 'buffers'); the option is the slip.
      String word = u.getUnmatched().stream().filter(a -> a.startsWith("-")).findFirst().orElse("");
      String option = word.contains("=") ? word.substring(0, word.indexOf('=')) : word;
      Optional<String> near =
          Slips.nearest(
              option,
              spec.options().stream()
                  .flatMap(o -> Arrays.stream(o.names()))
                  .filter(n -> n.startsWith("--"))
                  .toList());
      if (!option.isEmpty() && near.isPresent()) {
        return "Unknown option '" + option + "' (did you mean " + near.get() + "?)";
      }
    }
    return e.getMessage();
  }

  private static Throwable configurationCause(Throwable e) {
    return Causes.first(e, t -> t instanceof ConfigException || t instanceof CaptureSetupException)
        .orElse(null);
  }

  /**
   * The message of the outermost exception that says something of its own (not merely its cause's
   * class and message, as {@code UncheckedIOException} does), as a sentence; a file system's
   * failure, whose message may be a bare path, in words.
   */
  static String sentence(Throwable e) {
    for (Throwable t : Causes.chain(e)) {
      if (t instanceof KafkaException k
          && (String.valueOf(k.getMessage()).startsWith("Failed to construct")
              || String.valueOf(k.getMessage()).startsWith("Failed to create new"))
          && k.getCause() != null
          && k.getCause().getMessage() != null) {
        // Kafka's words for a client it could not build say nothing of why; its cause does.
        return "A Kafka client could not be created (check kafka.bootstrap-servers and"
            + " kafka.properties): "
            + k.getCause().getMessage().strip()
            + (k.getCause().getMessage().strip().endsWith(".") ? "" : ".");
      }
      String m =
          t instanceof FileSystemException f
              ? fileProblem(f)
              : t.getCause() != null && t.getCause().toString().equals(t.getMessage())
                  ? null
                  : t.getMessage();
      if (m != null && !m.isBlank()) {
        return m.endsWith(".") ? m : m + ".";
      }
    }
    return e.getClass().getSimpleName() + " (run with --verbose for details).";
  }

  /** What went wrong with a file or directory, naming it: {@code Permission denied: /srv/x}. */
  static String fileProblem(FileSystemException f) {
    String file =
        f.getFile() == null
            ? "a file"
            : f.getOtherFile() == null ? f.getFile() : f.getFile() + " -> " + f.getOtherFile();
    if (f instanceof AccessDeniedException) {
      return "Permission denied: " + file;
    }
    if (f instanceof FileAlreadyExistsException) {
      boolean directory = f.getFile() != null && Files.isDirectory(Path.of(f.getFile()));
      return "Cannot create "
          + file
          + ": a "
          + (directory ? "directory" : "file")
          + " of that name exists";
    }
    if (f instanceof NoSuchFileException) {
      return "No such file or directory: " + file;
    }
    if (f instanceof NotDirectoryException) {
      return "Not a directory: " + file;
    }
    if (f instanceof DirectoryNotEmptyException) {
      return "Directory not empty: " + file;
    }
    return f.getReason() == null ? "Cannot use " + file : f.getReason() + ": " + file;
  }

  private static boolean verbose(ParseResult parsed) {
    for (ParseResult p = parsed; p != null; p = p.hasSubcommand() ? p.subcommand() : null) {
      if (p.hasMatchedOption("--verbose")) {
        return true;
      }
    }
    return false;
  }
}
