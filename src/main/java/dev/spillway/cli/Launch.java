package dev.spillway.cli;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.LoggerContext;
import dev.spillway.config.ConfigLoader;
import dev.spillway.config.SpillwayConfig;
import dev.spillway.event.TopicProvisioner;
import dev.spillway.runtime.RuntimeInfo;
import java.nio.file.Path;
import java.util.Optional;
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

  /**
   * The Kafka a command reads: the configured one, else the running process's embedded broker.
   *
   * @param holding what the command wants from it, for the sentence when neither is there
   */
  static String kafka(SpillwayConfig config, Optional<RuntimeInfo> running, String holding)
      throws InterruptedException {
    String bootstrap =
        config
            .kafka()
            .bootstrapServers()
            .or(() -> running.map(RuntimeInfo::bootstrapServers))
            .orElseThrow(
                () ->
                    new IllegalStateException(
                        "Spillway is not running in "
                            + config.workingDir()
                            + ", and its embedded Kafka holding "
                            + holding
                            + " runs only with it."));
    // Said when it keeps the command waiting, and named when it never answers.
    TopicProvisioner.requireAnswer(bootstrap, config.kafka().properties());
    return bootstrap;
  }
}
