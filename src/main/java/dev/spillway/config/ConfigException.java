package dev.spillway.config;

/**
 * A configuration problem, as one plain sentence naming the file, line and key: {@code
 * spillway.yml:12: kafka.bootstrap-servers must be a string, not a list.} Thrown before anything is
 * started or changed; the launcher prints the message alone and exits with code 2.
 */
public final class ConfigException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final String source;
  private final Integer line;
  private final String key;

  /**
   * A problem of one key, which is the subject of the sentence: {@code <source>:<line>: <key>
   * <problem>.}
   *
   * @param source the file as the user named it, or a description when there is no file
   * @param line 1-based, or null when unknown
   * @param key dotted key path, or null for the file as a whole
   * @param problem the rest of the sentence, such as {@code is required}; a final full stop is
   *     added when missing
   */
  public ConfigException(String source, Integer line, String key, String problem) {
    this(
        source, line, key, location(source, line) + (key == null ? "" : key + " ") + problem, null);
  }

  private ConfigException(
      String source, Integer line, String key, String message, Throwable cause) {
    super(message.endsWith(".") ? message : message + ".", cause);
    this.source = source;
    this.line = line;
    this.key = key;
  }

  /**
   * A sentence of its own after the location, for problems whose subject is not the key: {@code
   * spillway.yml:3: unknown key kafka.bootstrap-server (did you mean bootstrap-servers?).}
   *
   * @param key recorded for {@link #key()}; the sentence names it where it reads best
   * @param cause chained, never shown to the user; may be null
   */
  static ConfigException sentence(
      String source, Integer line, String key, String sentence, Throwable cause) {
    return new ConfigException(source, line, key, location(source, line) + sentence, cause);
  }

  /**
   * A problem with the file itself, before any line of it could be read: the sentence names the
   * file, as in {@code config file conf/spillway.yml does not exist.}
   */
  static ConfigException file(String source, String sentence, Throwable cause) {
    return new ConfigException(source, null, null, sentence, cause);
  }

  private static String location(String source, Integer line) {
    return source + (line == null ? "" : ":" + line) + ": ";
  }

  /** The file as the user named it, or a description such as {@code test.yml} for parsed text. */
  public String source() {
    return source;
  }

  /** 1-based line of the problem, or null when it concerns the file as a whole. */
  public Integer line() {
    return line;
  }

  /** Dotted path of the key at fault, such as {@code databases.main.url}, or null. */
  public String key() {
    return key;
  }
}
