package dev.spillway.cli;

import java.util.List;
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
   * Unmatched argument at index 0}: the word, the nearest command if one is near, and the commands.
   */
  static String unknownCommand(CommandSpec spec, String word, List<String> suggestions) {
    // picocli always names its closest commands, however far: only a near one is a likely slip.
    List<String> near =
        suggestions.stream()
            .filter(
                c ->
                    !word.isEmpty()
                        && c.charAt(0) == word.charAt(0)
                        && Math.abs(c.length() - word.length()) <= 2)
            .toList();
    return "Unknown command '"
        + word
        + "'"
        + (near.isEmpty() ? "" : " (did you mean " + near.get(0) + "?)")
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
