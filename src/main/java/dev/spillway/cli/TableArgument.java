package dev.spillway.cli;

import dev.spillway.event.TableName;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.ParameterException;

/** A table named on the command line, {@code table} or {@code schema.table}. */
final class TableArgument {
  private TableArgument() {}

  /**
   * @param argument how the sentence names the argument, such as {@code --table} or {@code PARENT}
   * @throws ParameterException naming the argument, for what is no table name ({@code projects.})
   */
  static TableName parse(CommandSpec spec, String argument, String value) {
    try {
      return TableName.parse(value);
    } catch (IllegalArgumentException e) {
      throw new ParameterException(
          spec.commandLine(),
          argument + " '" + value + "' is not a table name: write table or schema.table");
    }
  }
}
