package dev.spillway.cli;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.LoggerContext;
import dev.spillway.config.ConfigLoader;
import dev.spillway.config.SpillwayConfig;
import java.nio.file.Path;
import org.slf4j.LoggerFactory;

/** What every command does first: read the configuration named on the command line. */
final class Launch {
  private Launch() {}

  static SpillwayConfig config(SpillwayCommand root) {
    if (root.verbose) {
      ((LoggerContext) LoggerFactory.getILoggerFactory())
          .getLogger("dev.spillway")
          .setLevel(Level.DEBUG);
    }
    if (root.config != null) {
      return ConfigLoader.load(root.config, System::getenv);
    }
    return ConfigLoader.loadDefault(Path.of("").toAbsolutePath(), System::getenv);
  }
}
