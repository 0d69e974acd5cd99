package dev.spillway.config;

import java.io.IOException;
import java.io.StringReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.function.Function;
import org.yaml.snakeyaml.LoaderOptions;
import org.yaml.snakeyaml.Yaml;
import org.yaml.snakeyaml.error.MarkedYAMLException;
import org.yaml.snakeyaml.error.YAMLException;
import org.yaml.snakeyaml.nodes.MappingNode;
import org.yaml.snakeyaml.nodes.Node;
import org.yaml.snakeyaml.nodes.ScalarNode;

/** Reads the configuration file. Every problem is a {@link ConfigException}, never a stack. */
public final class ConfigLoader {
  public static final String DEFAULT_FILE = "spillway.yml";

  private ConfigLoader() {}

  /** Reads a file the user named; it must exist. */
  public static SpillwayConfig load(Path file, Function<String, String> env) {
    if (!Files.isRegularFile(file)) {
      throw new ConfigException(file.toString(), null, null, "config file does not exist");
    }
    String yaml;
    try {
      yaml = Files.readString(file, StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new ConfigException(
          file.toString(), null, null, "could not be read: " + e.getMessage());
    }
    Path base = file.toAbsolutePath().getParent();
    return parse(yaml, file.toString(), file.toAbsolutePath(), base, env);
  }

  /** Reads {@code spillway.yml} in {@code cwd} when present; otherwise everything is embedded. */
  public static SpillwayConfig loadDefault(Path cwd, Function<String, String> env) {
    Path file = cwd.resolve(DEFAULT_FILE);
    if (Files.exists(file)) {
      return load(file, env);
    }
    return SpillwayConfig.defaults(cwd.toAbsolutePath());
  }

  /**
   * Parses YAML text.
   *
   * @param sourceName how messages name the file
   * @param source the file, or null
   * @param baseDir relative paths (working-dir) resolve against it
   */
  public static SpillwayConfig parse(
      String yaml, String sourceName, Path source, Path baseDir, Function<String, String> env) {
    LoaderOptions options = new LoaderOptions();
    options.setAllowDuplicateKeys(false);
    options.setMaxAliasesForCollections(50);
    Node root;
    try {
      root = new Yaml(options).compose(new StringReader(yaml));
    } catch (MarkedYAMLException e) {
      int line = e.getProblemMark() != null ? e.getProblemMark().getLine() + 1 : 1;
      String problem = e.getProblem() == null ? "is not valid YAML" : e.getProblem();
      throw new ConfigException(sourceName, line, null, "is not valid YAML: " + problem);
    } catch (YAMLException e) {
      throw new ConfigException(sourceName, null, null, "is not valid YAML: " + e.getMessage());
    }
    MappingNode mapping;
    if (root == null || (root instanceof ScalarNode s && s.getValue().isBlank())) {
      mapping = null;
    } else if (root instanceof MappingNode m) {
      mapping = m;
    } else {
      throw new ConfigException(sourceName, 1, null, "must be a YAML mapping of settings");
    }
    ConfigNode node = new ConfigNode(sourceName, "", mapping, env);
    return SpillwayConfig.from(node, source, baseDir);
  }
}
