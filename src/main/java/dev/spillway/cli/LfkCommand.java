package dev.spillway.cli;

import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.ParentCommand;
import picocli.CommandLine.Spec;

/** {@code spillway lfk …}: loose foreign keys. */
@Command(
    name = "lfk",
    description = "Loose foreign keys: backlog status, the generator and the sweep.",
    subcommands = {LfkStatusCommand.class, LfkGenerateCommand.class, LfkSweepCommand.class})
final class LfkCommand implements Runnable {
  @ParentCommand SpillwayCommand root;
  @Spec CommandSpec spec;

  @Override
  public void run() {
    throw CommandGroup.missingCommand(spec);
  }
}
