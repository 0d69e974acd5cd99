package dev.spillway.cli;

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
    String names =
        spec.subcommands().values().stream()
            .map(c -> c.getCommandName())
            .distinct()
            .collect(Collectors.joining(", "));
    return new ParameterException(spec.commandLine(), "Missing command: choose one of " + names);
  }
}
