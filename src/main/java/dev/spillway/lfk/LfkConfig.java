package dev.spillway.lfk;

import dev.spillway.config.ConfigNode;
import dev.spillway.config.SpillwayConfig;
import java.nio.file.Path;
import java.util.List;

/**
 * The {@code loose-foreign-keys:} section: settings and definitions, as written (not yet checked
 * against the catalogs).
 *
 * @param file the definitions file the section names, resolved, if it names one
 */
public record LfkConfig(
    LfkSettings settings, List<LooseForeignKey> definitions, java.util.Optional<Path> file) {
  public static final String SECTION = "loose-foreign-keys";

  public LfkConfig {
    definitions = List.copyOf(definitions);
  }

  /**
   * Reads the section; a relative definitions file resolves against the config file's directory.
   *
   * @throws dev.spillway.config.ConfigException naming file, line and key or entry
   */
  public static LfkConfig from(SpillwayConfig config) {
    return from(config, false);
  }

  /**
   * The same, for the generator, which creates a definitions file that does not exist yet.
   *
   * @param fileMayBeMissing whether a missing definitions file reads as empty
   */
  public static LfkConfig from(SpillwayConfig config, boolean fileMayBeMissing) {
    ConfigNode n = config.pipelineSection(SECTION);
    LfkSettings settings = LfkSettings.from(n, config.sink());
    Path baseDir =
        config.source() == null
            ? Path.of("").toAbsolutePath()
            : config.source().toAbsolutePath().getParent();
    java.util.Optional<Path> file = n.optionalString("file").map(baseDir::resolve);
    List<LooseForeignKey> definitions = DefinitionsFile.read(n, baseDir, fileMayBeMissing);
    n.finish();
    return new LfkConfig(settings, definitions, file);
  }

  /** Whether any loose foreign key is defined, so the pipeline has work to do. */
  public boolean enabled() {
    return !definitions.isEmpty();
  }
}
