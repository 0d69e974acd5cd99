package dev.spillway.config;

import java.io.IOException;
import java.io.StringReader;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.function.Function;
import org.yaml.snakeyaml.LoaderOptions;
import org.yaml.snakeyaml.Yaml;
import org.yaml.snakeyaml.error.MarkedYAMLException;
import org.yaml.snakeyaml.error.YAMLException;
import org.yaml.snakeyaml.nodes.MappingNode;
import org.yaml.snakeyaml.nodes.Node;
import org.yaml.snakeyaml.nodes.ScalarNode;
import org.yaml.snakeyaml.nodes.Tag;

/**
 * Reads the configuration file. Every problem is a {@link ConfigException} with one sentence, never
 * a stack trace; nothing is started or changed before the whole file has been checked.
 *
 * <p>{@code env} looks up environment variables for {@code ${env:NAME}}: {@code System::getenv} in
 * production, a map's {@code get} in tests; null means unset.
 */
public final class ConfigLoader {
  /** Read from the current directory when no file is named. */
  public static final String DEFAULT_FILE = "spillway.yml";

  // Aliases are for sharing a block, not for building the exponential documents of a "billion
  // laughs"; the limit stops those long before they cost memory.
  private static final int MAX_ALIASES = 50;

  private ConfigLoader() {}

  /**
   * Reads a file the user named; it must exist. Messages name the file as given, and relative paths
   * in it (working-dir) resolve against its directory.
   */
  public static SpillwayConfig load(Path file, Function<String, String> env) {
    String name = file.toString();
    if (!Files.exists(file)) {
      throw ConfigException.file(name, missing("config file " + name, file), null);
    }
    if (!Files.isRegularFile(file)) {
      throw ConfigException.file(name, "config file " + name + " is not a regular file", null);
    }
    String yaml;
    try {
      yaml = Files.readString(file, StandardCharsets.UTF_8);
    } catch (CharacterCodingException e) {
      throw ConfigException.file(name, "config file " + name + " is not UTF-8 text", e);
    } catch (IOException e) {
      throw ConfigException.file(name, unreadable("config file " + name, e), e);
    }
    Path absolute = file.toAbsolutePath();
    return parse(yaml, name, absolute, absolute.getParent(), env);
  }

  /**
   * Reads another YAML file the configuration names (such as loose-foreign-key definitions) as a
   * node, so its errors name that file and line like the configuration's own. An absent or empty
   * file gives an empty node. Its values take no {@code ${env:…}}: {@code lfk generate} rewrites
   * such a file, and would write the values in their place.
   *
   * @param name how messages name the file
   */
  public static ConfigNode readNode(Path file, String name) {
    if (!Files.exists(file)) {
      throw ConfigException.file(name, missing("file " + name, file), null);
    }
    try {
      return root(Files.readString(file, StandardCharsets.UTF_8), name, null);
    } catch (CharacterCodingException e) {
      throw ConfigException.file(name, "file " + name + " is not UTF-8 text", e);
    } catch (IOException e) {
      throw ConfigException.file(name, unreadable("file " + name, e), e);
    }
  }

  /**
   * Why {@code file}, not found, is not there: absent, or behind a directory this user may not look
   * into (then {@link Files#exists} cannot tell either way).
   */
  static String missing(String what, Path file) {
    return what + whyMissing(file);
  }

  /**
   * Why a file that is not a readable regular file is not there, after its name: {@code does not
   * exist}, or that this user cannot look at it, with the link it is when it is one.
   */
  public static String whyMissing(Path file) {
    String link = "";
    if (Files.isSymbolicLink(file)) {
      try {
        link = " (a symbolic link to " + Files.readSymbolicLink(file) + ")";
      } catch (IOException unreadable) {
        link = " (a symbolic link)";
      }
    }
    return Files.notExists(file)
        ? link + " does not exist"
        : link + " cannot be looked at by this user (a directory on its path may not be searched)";
  }

  /** Why {@code what} could not be read, in words: an access refused says only the path. */
  static String unreadable(String what, IOException e) {
    return e instanceof java.nio.file.AccessDeniedException
        ? what + " may not be read by this user (permission denied)"
        : what + " could not be read (" + e.getMessage() + ")";
  }

  /**
   * Reads {@code spillway.yml} in {@code cwd} when present; otherwise everything is embedded and
   * the working directory is {@code cwd/.spillway}.
   */
  public static SpillwayConfig loadDefault(Path cwd, Function<String, String> env) {
    Path file = cwd.resolve(DEFAULT_FILE);
    // A link to a file not there (yet) is a configuration that cannot be read, not none.
    if (Files.exists(file, LinkOption.NOFOLLOW_LINKS)) {
      return load(file, env);
    }
    return SpillwayConfig.defaults(cwd.toAbsolutePath());
  }

  /**
   * Parses YAML text that did not come from a file ({@link SpillwayConfig#source()} is null).
   *
   * @param sourceName how messages name the text, such as {@code spillway.yml}
   * @param baseDir relative paths (working-dir) resolve against it
   */
  public static SpillwayConfig parse(
      String yaml, String sourceName, Path baseDir, Function<String, String> env) {
    return parse(yaml, sourceName, null, baseDir, env);
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
    return SpillwayConfig.from(root(yaml, sourceName, env), source, baseDir);
  }

  /**
   * The root mapping of YAML text, for building the configuration or a section of it. Empty text,
   * only comments, or a null document give an empty root.
   */
  static ConfigNode root(String yaml, String sourceName, Function<String, String> env) {
    LoaderOptions options = new LoaderOptions();
    options.setMaxAliasesForCollections(MAX_ALIASES);
    Node root;
    try {
      // compose() keeps every scalar as written, with its line: "010" stays "010", "yes" stays
      // "yes", and each section decides what a value means.
      root = new Yaml(options).compose(new StringReader(yaml));
    } catch (MarkedYAMLException e) {
      YamlSyntax.Problem p = YamlSyntax.of(e, yaml);
      throw ConfigException.sentence(
          sourceName, p.line(), null, "invalid YAML: " + p.sentence(), e);
    } catch (YAMLException e) {
      String text = e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
      throw ConfigException.sentence(
          sourceName, null, null, "invalid YAML: " + YamlSyntax.oneLine(text), e);
    }
    if (root == null || Tag.NULL.equals(root.getTag())) {
      return ConfigNode.root(sourceName, null, env);
    }
    if (!(root instanceof MappingNode mapping)) {
      String found = root instanceof ScalarNode ? "a single value" : "a list";
      throw ConfigException.sentence(
          sourceName,
          ConfigNode.lineOf(root),
          null,
          "the file must be a mapping of settings such as 'http:', not " + found,
          null);
    }
    return ConfigNode.root(sourceName, mapping, env);
  }
}
