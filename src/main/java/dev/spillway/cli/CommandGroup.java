package dev.spillway.cli;

import java.util.Collection;
import java.util.Optional;
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
   * Unmatched argument at index 0}: the word, the command it is a slip of ({@link #nearest}), and
   * the commands.
   */
  static String unknownCommand(CommandSpec spec, String word) {
    return "Unknown command '"
        + word
        + "'"
        + nearest(word, spec.subcommands().keySet())
            .map(c -> " (did you mean " + c + "?)")
            .orElse("")
        + ": choose one of "
        + names(spec);
  }

  /**
   * The name {@code word} is a slip of, if one is near: two letters changed, left out, added or
   * swapped at most, one in a word of three (in a short word, two make another word).
   */
  static Optional<String> nearest(String word, Collection<String> names) {
    int slips = word.length() <= 3 ? 1 : 2;
    String best = null;
    int fewest = slips + 1;
    for (String name : names) {
      int d = distance(word, name);
      if (d < fewest) {
        best = name;
        fewest = d;
      }
    }
    return Optional.ofNullable(best);
  }

  /**
   * Edits (a letter changed, left out, added, or two swapped) that make {@code a} into {@code b}.
   */
  static int distance(String a, String b) {
    int[][] d = new int[a.length() + 1][b.length() + 1];
    for (int i = 0; i <= a.length(); i++) {
      for (int j = 0; j <= b.length(); j++) {
        if (i == 0 || j == 0) {
          d[i][j] = i + j;
          continue;
        }
        int change = a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1;
        d[i][j] = Math.min(Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1), d[i - 1][j - 1] + change);
        if (i > 1
            && j > 1
            && a.charAt(i - 1) == b.charAt(j - 2)
            && a.charAt(i - 2) == b.charAt(j - 1)) {
          d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
        }
      }
    }
    return d[a.length()][b.length()];
  }

  private static String names(CommandSpec spec) {
    return spec.subcommands().values().stream()
        .map(c -> c.getCommandName())
        .distinct()
        .collect(Collectors.joining(", "));
  }
}
