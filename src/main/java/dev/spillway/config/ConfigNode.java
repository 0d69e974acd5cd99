package dev.spillway.config;

import java.time.Duration;
import java.time.format.DateTimeParseException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.yaml.snakeyaml.nodes.MappingNode;
import org.yaml.snakeyaml.nodes.Node;
import org.yaml.snakeyaml.nodes.NodeTuple;
import org.yaml.snakeyaml.nodes.ScalarNode;
import org.yaml.snakeyaml.nodes.SequenceNode;

/**
 * A read-only view of one YAML mapping of the configuration, with its dotted path and source. It
 * hands out typed values, substitutes {@code ${env:NAME}} in scalars, and remembers which keys were
 * read so that {@link #finish()} rejects every key nobody asked for. Each problem is a {@link
 * ConfigException} naming file, line and key.
 *
 * <p>Not thread-safe; used once while the configuration is built.
 */
public final class ConfigNode {
  private static final Pattern ENV = Pattern.compile("\\$\\{env:([A-Za-z_][A-Za-z0-9_]*)}");
  private static final Pattern DURATION = Pattern.compile("(\\d+)\\s*(ms|s|m|h|d)");
  private static final Pattern SIZE = Pattern.compile("(\\d+)\\s*([kKmMgGtT]?[bB])");

  private final String source;
  private final String path;
  private final int line;
  private final Map<String, NodeTuple> entries = new LinkedHashMap<>();
  private final Set<String> read = new java.util.HashSet<>();
  private final Function<String, String> env;

  ConfigNode(String source, String path, MappingNode node, Function<String, String> env) {
    this.source = source;
    this.path = path;
    this.env = env;
    this.line = node == null ? 1 : node.getStartMark().getLine() + 1;
    if (node != null) {
      for (NodeTuple t : node.getValue()) {
        if (!(t.getKeyNode() instanceof ScalarNode k)) {
          throw new ConfigException(
              source, lineOf(t.getKeyNode()), pathOr("(root)"), "has a key that is not a string");
        }
        if (entries.putIfAbsent(k.getValue(), t) != null) {
          throw new ConfigException(
              source, lineOf(k), qualified(k.getValue()), "appears twice in the same mapping");
        }
      }
    }
  }

  /** A node with no keys at all, for a missing section. */
  static ConfigNode empty(String source, String path, Function<String, String> env) {
    return new ConfigNode(source, path, null, env);
  }

  public String source() {
    return source;
  }

  /** The dotted path of this mapping; empty for the root. */
  public String path() {
    return path;
  }

  /** 1-based line of this mapping. */
  public int line() {
    return line;
  }

  /** 1-based line of a key, or of this mapping when the key is absent. */
  public int line(String key) {
    NodeTuple t = entries.get(key);
    return t == null ? line : lineOf(t.getKeyNode());
  }

  public boolean has(String key) {
    return entries.containsKey(key) && !isNull(entries.get(key).getValueNode());
  }

  /** Every key present, in file order. */
  public List<String> keys() {
    return new ArrayList<>(entries.keySet());
  }

  /** The full dotted name of a key of this mapping. */
  public String qualified(String key) {
    return path.isEmpty() ? key : path + "." + key;
  }

  /** An error about a key of this mapping, located at its line. */
  public ConfigException error(String key, String problem) {
    return new ConfigException(source, line(key), qualified(key), problem);
  }

  public String string(String key, String dflt) {
    return optionalString(key).orElse(dflt);
  }

  public String requiredString(String key) {
    return optionalString(key).orElseThrow(() -> missing(key));
  }

  public Optional<String> optionalString(String key) {
    Node n = value(key);
    if (n == null) {
      return Optional.empty();
    }
    return Optional.of(scalar(key, n, "a string"));
  }

  public int integer(String key, int dflt) {
    return integer(key, dflt, Integer.MIN_VALUE, Integer.MAX_VALUE);
  }

  /** An integer within [min, max]. */
  public int integer(String key, int dflt, int min, int max) {
    Node n = value(key);
    if (n == null) {
      return dflt;
    }
    String s = scalar(key, n, "a whole number");
    int v;
    try {
      v = Integer.parseInt(s.replace("_", ""));
    } catch (NumberFormatException e) {
      throw error(key, "must be a whole number, not '" + s + "'");
    }
    if (v < min || v > max) {
      throw error(key, "must be between " + min + " and " + max + ", not " + v);
    }
    return v;
  }

  /** A ratio or factor: a decimal number within [min, max]. */
  public double decimal(String key, double dflt, double min, double max) {
    Node n = value(key);
    if (n == null) {
      return dflt;
    }
    String s = scalar(key, n, "a number");
    double v;
    try {
      v = Double.parseDouble(s);
    } catch (NumberFormatException e) {
      throw error(key, "must be a number, not '" + s + "'");
    }
    if (!(v >= min && v <= max)) {
      throw error(key, "must be between " + min + " and " + max + ", not " + s);
    }
    return v;
  }

  /** A size in bytes: {@code 512B}, {@code 64kB}, {@code 100MB}, {@code 4GB}, {@code 1TB}. */
  public long bytes(String key, long dflt) {
    Node n = value(key);
    if (n == null) {
      return dflt;
    }
    String s = scalar(key, n, "a size such as 100MB").trim();
    Matcher m = SIZE.matcher(s);
    if (!m.matches()) {
      throw error(key, "must be a size such as 100MB or 4GB, not '" + s + "'");
    }
    long amount = Long.parseLong(m.group(1));
    int shift =
        switch (m.group(2).toUpperCase(Locale.ROOT)) {
          case "B" -> 0;
          case "KB" -> 10;
          case "MB" -> 20;
          case "GB" -> 30;
          default -> 40;
        };
    return amount << shift;
  }

  public boolean bool(String key, boolean dflt) {
    Node n = value(key);
    if (n == null) {
      return dflt;
    }
    String s = scalar(key, n, "true or false").toLowerCase(Locale.ROOT);
    return switch (s) {
      case "true", "yes", "on" -> true;
      case "false", "no", "off" -> false;
      default -> throw error(key, "must be true or false, not '" + s + "'");
    };
  }

  /** {@code 500ms}, {@code 2s}, {@code 10m}, {@code 1h}, {@code 1d} or ISO-8601 {@code PT2S}. */
  public Duration duration(String key, Duration dflt) {
    Node n = value(key);
    if (n == null) {
      return dflt;
    }
    String s = scalar(key, n, "a duration such as 2s").trim();
    Matcher m = DURATION.matcher(s);
    if (m.matches()) {
      long amount = Long.parseLong(m.group(1));
      return switch (m.group(2)) {
        case "ms" -> Duration.ofMillis(amount);
        case "s" -> Duration.ofSeconds(amount);
        case "m" -> Duration.ofMinutes(amount);
        case "h" -> Duration.ofHours(amount);
        default -> Duration.ofDays(amount);
      };
    }
    if (s.startsWith("P") || s.startsWith("p")) {
      try {
        return Duration.parse(s);
      } catch (DateTimeParseException e) {
        // fall through to the common message
      }
    }
    throw error(key, "must be a duration such as 2s or 500ms, not '" + s + "'");
  }

  /** A sub-mapping, if present. */
  public Optional<ConfigNode> child(String key) {
    Node n = value(key);
    if (n == null) {
      return Optional.empty();
    }
    if (!(n instanceof MappingNode m)) {
      throw error(key, "must be a mapping, not " + kind(n));
    }
    return Optional.of(new ConfigNode(source, qualified(key), m, env));
  }

  /** A sub-mapping, or an empty one when absent; unknown keys inside are still rejected. */
  public ConfigNode section(String key) {
    return child(key).orElseGet(() -> empty(source, qualified(key), env));
  }

  /** A free-form mapping of scalars (keys are not checked for kebab-case). */
  public Map<String, String> stringMap(String key) {
    Map<String, String> out = new LinkedHashMap<>();
    Optional<ConfigNode> m = child(key);
    if (m.isEmpty()) {
      return out;
    }
    ConfigNode p = m.get();
    for (String k : p.keys()) {
      out.put(k, p.requiredString(k));
    }
    return out;
  }

  public List<String> stringList(String key) {
    Node n = value(key);
    if (n == null) {
      return List.of();
    }
    if (!(n instanceof SequenceNode seq)) {
      throw error(key, "must be a list, not " + kind(n));
    }
    List<String> out = new ArrayList<>();
    for (Node item : seq.getValue()) {
      out.add(scalar(key, item, "a list of strings"));
    }
    return out;
  }

  /**
   * Rejects any key of this mapping that was not read, suggesting a known key when one is close.
   */
  public void finish() {
    for (String key : entries.keySet()) {
      if (!read.contains(key)) {
        String suggestion = closest(key);
        throw error(
            key,
            suggestion == null
                ? "is not a known key"
                    + (read.isEmpty()
                        ? ""
                        : " (known keys: " + String.join(", ", new TreeSet<>(read)) + ")")
                : "is not a known key (did you mean " + suggestion + "?)");
      }
    }
  }

  /** Marks keys as known without reading them, so {@link #finish()} accepts them. */
  public void known(String... keys) {
    Collections.addAll(read, keys);
  }

  private String closest(String key) {
    String best = null;
    int bestDistance = 3;
    for (String k : read) {
      int d = distance(key, k);
      if (d < bestDistance) {
        best = k;
        bestDistance = d;
      }
    }
    return best;
  }

  private Node value(String key) {
    read.add(key);
    NodeTuple t = entries.get(key);
    if (t == null || isNull(t.getValueNode())) {
      return null;
    }
    return t.getValueNode();
  }

  private String scalar(String key, Node n, String expected) {
    if (!(n instanceof ScalarNode s)) {
      throw new ConfigException(
          source, lineOf(n), qualified(key), "must be " + expected + ", not " + kind(n));
    }
    return substitute(key, n, s.getValue());
  }

  private String substitute(String key, Node n, String value) {
    Matcher m = ENV.matcher(value);
    StringBuilder out = new StringBuilder();
    while (m.find()) {
      String name = m.group(1);
      String v = env.apply(name);
      if (v == null) {
        throw new ConfigException(
            source,
            lineOf(n),
            qualified(key),
            "refers to environment variable " + name + ", which is not set");
      }
      m.appendReplacement(out, Matcher.quoteReplacement(v));
    }
    m.appendTail(out);
    return out.toString();
  }

  private ConfigException missing(String key) {
    return new ConfigException(source, line, qualified(key), "is required");
  }

  private String pathOr(String dflt) {
    return path.isEmpty() ? dflt : path;
  }

  private static boolean isNull(Node n) {
    return n instanceof ScalarNode s && "tag:yaml.org,2002:null".equals(s.getTag().getValue());
  }

  private static int lineOf(Node n) {
    return n.getStartMark().getLine() + 1;
  }

  private static String kind(Node n) {
    if (n instanceof MappingNode) {
      return "a mapping";
    }
    if (n instanceof SequenceNode) {
      return "a list";
    }
    return "'" + ((ScalarNode) n).getValue() + "'";
  }

  private static int distance(String a, String b) {
    int[] prev = new int[b.length() + 1];
    int[] cur = new int[b.length() + 1];
    for (int j = 0; j <= b.length(); j++) {
      prev[j] = j;
    }
    for (int i = 1; i <= a.length(); i++) {
      cur[0] = i;
      for (int j = 1; j <= b.length(); j++) {
        int cost = a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1;
        cur[j] = Math.min(Math.min(cur[j - 1] + 1, prev[j] + 1), prev[j - 1] + cost);
      }
      int[] t = prev;
      prev = cur;
      cur = t;
    }
    return prev[b.length()];
  }
}
