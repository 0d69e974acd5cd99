package dev.spillway.config;

/**
 * A configuration problem, as one sentence naming the file, line and key: {@code spillway.yml:12:
 * kafka.bootstrap-servers must be a string, not a list.} Thrown before anything is started or
 * changed.
 */
public final class ConfigException extends RuntimeException {
  private final String source;
  private final Integer line;
  private final String key;

  /**
   * @param source the file as the user named it, or a description when there is no file
   * @param line 1-based, or null when unknown
   * @param key dotted key path, or null for the file as a whole
   */
  public ConfigException(String source, Integer line, String key, String problem) {
    super(format(source, line, key, problem));
    this.source = source;
    this.line = line;
    this.key = key;
  }

  private static String format(String source, Integer line, String key, String problem) {
    StringBuilder b = new StringBuilder(source);
    if (line != null) {
      b.append(':').append(line);
    }
    b.append(": ");
    if (key != null) {
      b.append(key).append(' ');
    }
    b.append(problem);
    if (!problem.endsWith(".")) {
      b.append('.');
    }
    return b.toString();
  }

  public String source() {
    return source;
  }

  public Integer line() {
    return line;
  }

  public String key() {
    return key;
  }
}
