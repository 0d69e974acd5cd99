package dev.spillway.lfk;

import dev.spillway.config.ConfigNode;
import dev.spillway.config.SpillwayConfig;
import java.nio.file.Path;
import java.util.List;

/**
 * The {@code loose-foreign-keys:} section: settings and definitions, as written (not yet checked
 * against the catalogs).
 */
public record LfkConfig(LfkSettings settings, List<LooseForeignKey> definitions) {
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
    ConfigNode n = config.pipelineSection(SECTION);
    LfkSettings settings = LfkSettings.from(n, config.sink());
    Path baseDir =
        config.source() == null
            ? Path.of("").toAbsolutePath()
            : config.source().toAbsolutePath().getParent();
    List<LooseForeignKey> definitions = DefinitionsFile.read(n, baseDir);
    n.finish();
    return new LfkConfig(settings, definitions);
  }

  /** Whether any loose foreign key is defined, so the pipeline has work to do. */
  public boolean enabled() {
    return !definitions.isEmpty();
  }
}
