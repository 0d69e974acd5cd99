package dev.spillway.cli;

import dev.spillway.support.Slips;
import java.util.stream.Collectors;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.ParameterException;

/**
 * What a command that only groups others does when run alone: refuse, as a usage error naming the
 * commands it groups, so a script that forgot one fails instead of passing having done nothing.
 */
final class CommandGroup {
  private CommandGroup() {}

  static ParameterException missingCommand(CommandSpec spec) {
    return new ParameterException(
        spec.commandLine(), "Missing command: choose one of " + names(spec));
  }

  /**
   * What a group says of a word that names none of its commands, where picocli would say {@code
   * Unmatched argument at index 0}: the word, the command it is a slip of ({@link Slips#nearest}),
   * and the commands.
   */
  static String unknownCommand(CommandSpec spec, String word) {
    return "Unknown command '"
        + word
        + "'"
        + Slips.nearest(word, spec.subcommands().keySet())
            .map(c -> " (did you mean " + c + "?)")
            .orElse("")
        + ": choose one of "
        + names(spec);
  }

  private static String names(CommandSpec spec) {
    return spec.subcommands().values().stream()
        .map(c -> c.getCommandName())
        .distinct()
        .collect(Collectors.joining(", "));
  }
}
