package dev.spillway.config;

import dev.spillway.support.Slips;
import java.math.BigDecimal;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
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
import org.yaml.snakeyaml.nodes.Tag;

/**
 * A read-only view of one YAML mapping of the configuration, with its dotted path (such as {@code
 * databases.main}) and source. It hands out typed values, substitutes {@code ${env:NAME}} in
 * scalars, and remembers which keys were read, so that {@link #finish()} rejects every key nobody
 * asked for. Every problem is a {@link ConfigException} naming file, line and key.
 *
 * <p>Keys a section reads are kebab-case ({@code poll-interval}); keys the user chooses (database
 * names, table names, Kafka properties) are read with {@link #children}, {@link #stringMap} or
 * {@link #keys} and may be anything. An absent key and a key with an empty value ({@code key:} or
 * {@code key: ~}) mean the same: the default applies. YAML merge keys ({@code <<: *defaults}) are
 * honoured; keys written in the mapping itself win over merged ones.
 *
 * <p>A section reads its keys, builds its record and calls {@link #finish()}:
 *
 * <pre>{@code
 * static HttpConfig from(ConfigNode n) {
 *   HttpConfig c = new HttpConfig(n.integer("port", DEFAULT_PORT, 0, 65535));
 *   n.finish();
 *   return c;
 * }
 * }</pre>
 *
 * <p>Not thread-safe; used once, while the configuration is built.
 */
public final class ConfigNode {
  private static final Pattern ENV = Pattern.compile("\\$\\{env:([^}]*)}");
  private static final Pattern ENV_NAME = Pattern.compile("[A-Za-z_][A-Za-z0-9_]*");
  private static final Pattern SIZE = Pattern.compile("(\\d+)\\s*([kKmMgGtT]?[bB])");
  private static final Pattern CAMEL_HUMP = Pattern.compile("([a-z0-9])([A-Z])");
  private static final String ENV_START = "${env:";
  private static final int MAX_SUGGESTION_DISTANCE = 2;
  private static final int MAX_QUOTED_LENGTH = 40;
  private static final Duration MIN_POSITIVE_DURATION = Duration.ofMillis(1);
  private static final Duration INT_MILLIS_MAX = Duration.ofMillis(Integer.MAX_VALUE);

  private final String source;
  private final String path;
  private final int line;
  private final Map<String, NodeTuple> entries;
  private final Set<String> read = new LinkedHashSet<>();

  /** Values of environment variables; null for a file whose values take no {@code ${env:…}}. */
  private final Function<String, String> env;

  private final MappingNode node;

  /**
   * @param line 1-based line that errors about absent keys point at
   * @param node null for an absent section
   */
  ConfigNode(String source, String path, int line, MappingNode node, Function<String, String> env) {
    this.source = source;
    this.path = path;
    this.line = line;
    this.env = env;
    this.node = node;
    this.entries =
        node == null
            ? Map.of()
            : entriesOf(node, Collections.newSetFromMap(new IdentityHashMap<>()));
  }

  /** The root of a file: errors about absent top-level keys point at its first line. */
  static ConfigNode root(String source, MappingNode node, Function<String, String> env) {
    return new ConfigNode(source, "", node == null ? 1 : lineOf(node), node, env);
  }

  /**
   * The same mapping with nothing read yet, for a section read later than the rest of the file
   * (pipeline sections: the configuration keeps them, each pipeline reads its own).
   */
  public ConfigNode fresh() {
    return new ConfigNode(source, path, line, node, env);
  }

  /** The file as messages name it. */
  public String source() {
    return source;
  }

  /** The dotted path of this mapping; empty for the root. */
  public String path() {
    return path;
  }

  /** 1-based line of this mapping's key in its parent (line 1 or the first key for the root). */
  public int line() {
    return line;
  }

  /** 1-based line of a key, or {@link #line()} when the key is absent. */
  public int line(String key) {
    NodeTuple t = entries.get(key);
    return t == null ? line : lineOf(t.getKeyNode());
  }

  /** Whether the key is present with a value; does not count as reading it. */
  public boolean has(String key) {
    NodeTuple t = entries.get(key);
    return t != null && !isNull(t.getValueNode());
  }

  /** Whether the key is present and holds a mapping. */
  public boolean isMapping(String key) {
    return value(key) instanceof MappingNode;
  }

  /** Whether the key holds a list; does not count as reading it. */
  public boolean isList(String key) {
    NodeTuple t = entries.get(key);
    return t != null && t.getValueNode() instanceof SequenceNode;
  }

  /** Every key present, in file order; does not count as reading them. */
  public List<String> keys() {
    return List.copyOf(entries.keySet());
  }

  /** The full dotted name of a key of this mapping, as messages show it. */
  public String qualified(String key) {
    return path.isEmpty() ? key : path + "." + key;
  }

  /**
   * An error about a key of this mapping, at the key's line (or this mapping's when absent), for
   * checks a section makes itself: {@code throw n.error("url", "must start with
   * jdbc:postgresql:")}.
   *
   * @param problem the sentence after the key, such as {@code must be at least 2}
   */
  public ConfigException error(String key, String problem) {
    return new ConfigException(source, line(key), qualified(key), problem);
  }

  /**
   * An error about this mapping as a whole, at its line: {@code buffers.events.handler must name
   * exactly one of http, sql and class.}
   */
  public ConfigException invalid(String problem) {
    return new ConfigException(source, line, path.isEmpty() ? null : path, problem);
  }

  public String string(String key, String dflt) {
    return optionalString(key).orElse(dflt);
  }

  /**
   * A string that must be present: {@code databases.main.url is required.} otherwise, or, when the
   * mapping holds a misspelling of it, {@code unknown key databases.main.ulr (did you mean url?).}
   */
  public String requiredString(String key) {
    return optionalString(key).orElseThrow(() -> missing(key));
  }

  /**
   * A required key's absence, told as the misspelling of it that the mapping holds, if any: the
   * closest key not read so far.
   */
  private ConfigException missing(String key) {
    return Slips.nearest(
            entries.keySet(),
            written -> read.contains(written) ? Integer.MAX_VALUE : closeness(written, key),
            MAX_SUGGESTION_DISTANCE)
        .map(misspelt -> unknown(misspelt, " (did you mean " + key + "?)"))
        .orElseGet(() -> error(key, "is required"));
  }

  public Optional<String> optionalString(String key) {
    Node n = value(key);
    return n == null ? Optional.empty() : Optional.of(scalar(key, n, "a string"));
  }

  public int integer(String key, int dflt) {
    return integer(key, dflt, Integer.MIN_VALUE, Integer.MAX_VALUE);
  }

  /** A whole number within [min, max]; {@code 1_000} is accepted. */
  public int integer(String key, int dflt, int min, int max) {
    Node n = value(key);
    if (n == null) {
      return dflt;
    }
    String s = scalar(key, n, "a whole number");
    long v;
    try {
      v = Long.parseLong(s.trim().replace("_", ""));
    } catch (NumberFormatException e) {
      throw error(key, "must be a whole number, not " + quote(s));
    }
    if (v < min || v > max) {
      throw error(key, "must be between " + min + " and " + max + ", not " + v);
    }
    return (int) v;
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
      v = Double.parseDouble(s.trim());
    } catch (NumberFormatException e) {
      throw error(key, "must be a number, not " + quote(s));
    }
    if (!(v >= min && v <= max)) {
      throw error(
          key, "must be between " + plain(min) + " and " + plain(max) + ", not " + s.trim());
    }
    return v;
  }

  /** A bound as people write it: {@code 1000000}, {@code 0.001}, not {@code 1000000.0}. */
  private static String plain(double bound) {
    return BigDecimal.valueOf(bound).stripTrailingZeros().toPlainString();
  }

  /** A size in bytes: {@code 512B}, {@code 64kB}, {@code 100MB}, {@code 4GB}, {@code 1TB}. */
  public long bytes(String key, long dflt) {
    Node n = value(key);
    if (n == null) {
      return dflt;
    }
    String s = scalar(key, n, "a size such as 100MB");
    Matcher m = SIZE.matcher(s.trim());
    if (!m.matches()) {
      throw error(key, "must be a size such as 100MB or 4GB, not " + quote(s));
    }
    int shift =
        switch (m.group(2).toUpperCase(Locale.ROOT)) {
          case "B" -> 0;
          case "KB" -> 10;
          case "MB" -> 20;
          case "GB" -> 30;
          default -> 40;
        };
    try {
      long amount = Long.parseLong(m.group(1));
      if (amount > Long.MAX_VALUE >> shift) {
        throw new NumberFormatException();
      }
      return amount << shift;
    } catch (NumberFormatException e) {
      throw error(key, "is too large: " + s.trim());
    }
  }

  /** {@code true}/{@code false}, also {@code yes}/{@code no} and {@code on}/{@code off}. */
  public boolean bool(String key, boolean dflt) {
    Node n = value(key);
    if (n == null) {
      return dflt;
    }
    String s = scalar(key, n, "true or false");
    return switch (s.trim().toLowerCase(Locale.ROOT)) {
      case "true", "yes", "on" -> true;
      case "false", "no", "off" -> false;
      default -> throw error(key, "must be true or false, not " + quote(s));
    };
  }

  /**
   * A duration of zero or more, at most {@link DurationText#MAX}: {@code 500ms}, {@code 2s}, {@code
   * 10m}, {@code 1h}, {@code 1d} or ISO-8601 such as {@code PT2S}. A bare number is refused, since
   * its unit would be a guess.
   */
  public Duration duration(String key, Duration dflt) {
    return duration(
        key, dflt, DurationText.MAX, "must be at most " + DurationText.format(DurationText.MAX));
  }

  /**
   * A {@link #duration} PostgreSQL takes as a millisecond setting ({@code lock_timeout}, {@code
   * statement_timeout}): at most 2^31 - 1 ms (24 days and a bit); 0s for none.
   */
  public Duration postgresTimeout(String key, Duration dflt) {
    return duration(
        key, dflt, INT_MILLIS_MAX, "must be at most 24d (PostgreSQL's limit), or 0s for none");
  }

  /**
   * A duration of zero or more, up to {@code max}.
   *
   * @param tooLong the sentence after the key for a duration longer than {@code max}
   */
  private Duration duration(String key, Duration dflt, Duration max, String tooLong) {
    Node n = value(key);
    if (n == null) {
      return dflt;
    }
    String s = scalar(key, n, "a duration such as 2s");
    Duration d =
        DurationText.parse(s)
            .orElseThrow(
                () -> error(key, "must be a duration such as 2s or 500ms, not " + quote(s)));
    if (d.isNegative()) {
      throw error(key, "must not be negative");
    }
    if (d.compareTo(max) > 0) {
      throw error(key, tooLong);
    }
    return d;
  }

  /**
   * A {@link #duration} of at least 1ms: what Spillway waits or schedules with such a setting
   * counts in whole milliseconds, where a shorter one would be zero.
   */
  public Duration positiveDuration(String key, Duration dflt) {
    return positive(key, duration(key, dflt));
  }

  /**
   * A {@link #positiveDuration} given to a client that counts it in milliseconds as an int, such as
   * Debezium's intervals: at most 24 days.
   */
  public Duration positiveIntMillis(String key, Duration dflt) {
    return positive(
        key, duration(key, dflt, INT_MILLIS_MAX, "must be at most 24d (Debezium's limit)"));
  }

  /**
   * A {@link #positiveDuration} up to {@code max}.
   *
   * @param why what a longer one would do, said after the bound
   */
  public Duration positiveDuration(String key, Duration dflt, Duration max, String why) {
    return positive(
        key, duration(key, dflt, max, "must be at most " + DurationText.format(max) + " " + why));
  }

  private Duration positive(String key, Duration d) {
    if (d.compareTo(MIN_POSITIVE_DURATION) < 0) {
      throw error(key, "must be at least " + DurationText.format(MIN_POSITIVE_DURATION));
    }
    return d;
  }

  /** A sub-mapping, if present; its unknown keys are rejected by its own {@link #finish()}. */
  public Optional<ConfigNode> child(String key) {
    Node n = value(key);
    if (n == null) {
      return Optional.empty();
    }
    return Optional.of(new ConfigNode(source, qualified(key), line(key), mapping(key, n), env));
  }

  /** A sub-mapping, or an empty one when absent, so a section always reads its defaults. */
  public ConfigNode section(String key) {
    return child(key).orElseGet(() -> new ConfigNode(source, qualified(key), line, null, env));
  }

  /**
   * A mapping of user-named sub-mappings, such as {@code databases: { main: {...}, ci: {...} }}, in
   * file order. The names are not checked; each value must be a mapping.
   */
  public Map<String, ConfigNode> children(String key) {
    Optional<ConfigNode> parent = child(key);
    if (parent.isEmpty()) {
      return Map.of();
    }
    ConfigNode p = parent.get();
    Map<String, ConfigNode> out = new LinkedHashMap<>();
    for (String name : p.keys()) {
      Node n = p.value(name);
      if (n == null) {
        throw p.error(name, "must be a mapping, not empty");
      }
      out.put(
          name, new ConfigNode(source, p.qualified(name), p.line(name), p.mapping(name, n), env));
    }
    return Collections.unmodifiableMap(out);
  }

  /**
   * A free-form mapping of strings in file order, such as Kafka client properties; its keys are
   * taken as written ({@code security.protocol}), its values substituted.
   */
  public Map<String, String> stringMap(String key) {
    Optional<ConfigNode> parent = child(key);
    if (parent.isEmpty()) {
      return Map.of();
    }
    ConfigNode p = parent.get();
    Map<String, String> out = new LinkedHashMap<>();
    for (String k : p.keys()) {
      Node n = p.value(k);
      if (n == null) {
        throw p.error(k, "must have a value");
      }
      out.put(k, p.scalar(k, n, "a string"));
    }
    return Collections.unmodifiableMap(out);
  }

  /** A list of strings; a single string is not taken for a list of one. */
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
      if (isNull(item)) {
        throw new ConfigException(source, lineOf(item), qualified(key), "has an empty item");
      }
      if (!(item instanceof ScalarNode s)) {
        throw new ConfigException(
            source,
            lineOf(item),
            qualified(key),
            "must be a list of strings, not of " + kind(item));
      }
      out.add(substitute(key, lineOf(item), s.getValue()));
    }
    return List.copyOf(out);
  }

  /**
   * A list of mappings, such as GitLab's definitions {@code - table: … column: …}; each item is a
   * node of its own, named {@code key[1]}, {@code key[2]}… in messages, at its own line.
   */
  public List<ConfigNode> mappings(String key) {
    Node n = value(key);
    if (n == null) {
      return List.of();
    }
    if (!(n instanceof SequenceNode seq)) {
      throw error(key, "must be a list, not " + kind(n));
    }
    List<ConfigNode> out = new ArrayList<>();
    int i = 0;
    for (Node item : seq.getValue()) {
      i++;
      String itemPath = qualified(key) + "[" + i + "]";
      if (!(item instanceof MappingNode m)) {
        throw new ConfigException(
            source, lineOf(item), itemPath, "must be a mapping, not " + kind(item));
      }
      out.add(new ConfigNode(source, itemPath, lineOf(item), m, env));
    }
    return List.copyOf(out);
  }

  /**
   * A scalar as YAML types it: Long for integers, Double for decimals, Boolean, String, or empty
   * for an absent or null value. For values Spillway passes on to SQL rather than interprets.
   */
  public Optional<Object> typedScalar(String key) {
    Node n = value(key);
    if (n == null) {
      return Optional.empty();
    }
    String text = scalar(key, n, "a single value");
    Tag tag = n.getTag();
    try {
      if (Tag.INT.equals(tag)) {
        return Optional.of(Long.parseLong(text.replace("_", "")));
      }
      if (Tag.FLOAT.equals(tag)) {
        return Optional.of(Double.parseDouble(text.replace("_", "")));
      }
    } catch (NumberFormatException e) {
      return Optional.of(text);
    }
    if (Tag.BOOL.equals(tag)) {
      // YAML 1.1 booleans, as GitLab's Ruby reads them: yes and on are true, like true itself.
      return Optional.of(
          switch (text.toLowerCase(Locale.ROOT)) {
            case "true", "yes", "on" -> true;
            default -> false;
          });
    }
    return Optional.of(text);
  }

  /**
   * Rejects, before any value is read, a key that is not one of these: a misspelled key is then
   * named even when its absence would fail a check first ({@code handlr:} for {@code handler:}).
   */
  public void only(String... keys) {
    known(keys);
    finish();
  }

  /** Marks keys as known without reading them, so {@link #finish()} accepts them. */
  public void known(String... keys) {
    Collections.addAll(read, keys);
  }

  /**
   * Rejects the first key of this mapping that was not read, suggesting a known key when one is
   * close: {@code spillway.yml:3: unknown key kafka.bootstrap-server (did you mean
   * bootstrap-servers?).} Call it after reading every key the section knows.
   */
  public void finish() {
    for (String key : entries.keySet()) {
      if (!read.contains(key)) {
        String hint =
            suggestion(key)
                .map(s -> " (did you mean " + s + "?)")
                .orElse(
                    read.isEmpty()
                        ? ""
                        : " (known keys: " + String.join(", ", new TreeSet<>(read)) + ")");
        throw unknown(key, hint);
      }
    }
  }

  private ConfigException unknown(String key, String hint) {
    return ConfigException.sentence(
        source, line(key), qualified(key), "unknown key " + qualified(key) + hint, null);
  }

  /**
   * The known key the user most likely meant: the kebab-case spelling of {@code pollInterval} or
   * {@code poll_interval}, else the closest key within a small edit distance.
   */
  private Optional<String> suggestion(String key) {
    return Slips.nearest(read, k -> closeness(key, k), MAX_SUGGESTION_DISTANCE);
  }

  /**
   * How far a written key is from a known one: 0 when it is the known key in another case style
   * ({@code pollInterval}, {@code poll_interval}), else the edit distance, or more than any
   * suggestion allows when the distance is the whole key ("ab" is two edits from any two letters).
   */
  private static int closeness(String written, String known) {
    String kebab =
        CAMEL_HUMP.matcher(written).replaceAll("$1-$2").replace('_', '-').toLowerCase(Locale.ROOT);
    if (kebab.equals(known)) {
      return 0;
    }
    int d = Slips.distance(written, known);
    return d < written.length() ? d : Integer.MAX_VALUE;
  }

  private Node value(String key) {
    read.add(key);
    NodeTuple t = entries.get(key);
    if (t == null || isNull(t.getValueNode())) {
      return null;
    }
    return t.getValueNode();
  }

  private MappingNode mapping(String key, Node n) {
    if (!(n instanceof MappingNode m)) {
      throw error(key, "must be a mapping, not " + kind(n));
    }
    return m;
  }

  private String scalar(String key, Node n, String expected) {
    if (!(n instanceof ScalarNode s)) {
      throw error(key, "must be " + expected + ", not " + kind(n));
    }
    return substitute(key, line(key), s.getValue());
  }

  /** Replaces every {@code ${env:NAME}}; the result is not scanned again. */
  private String substitute(String key, int at, String value) {
    Matcher m = ENV.matcher(value);
    StringBuilder out = new StringBuilder();
    int end = 0;
    while (m.find()) {
      String name = m.group(1);
      if (!ENV_NAME.matcher(name).matches()) {
        throw new ConfigException(
            source,
            at,
            qualified(key),
            "refers to environment variable "
                + quote(name)
                + ", which is not a valid name (letters, digits and '_')");
      }
      if (env == null) {
        throw new ConfigException(
            source,
            at,
            qualified(key),
            "refers to environment variable "
                + name
                + ", which this file cannot: only the configuration file's values take ${env:…};"
                + " write the value here, or the definition in the configuration");
      }
      String v = env.apply(name);
      if (v == null) {
        throw new ConfigException(
            source,
            at,
            qualified(key),
            "refers to environment variable " + name + ", which is not set");
      }
      m.appendReplacement(out, Matcher.quoteReplacement(v));
      end = m.end();
    }
    if (value.indexOf(ENV_START, end) >= 0) {
      throw new ConfigException(
          source, at, qualified(key), "has a " + ENV_START + " reference without its closing }");
    }
    m.appendTail(out);
    return out.toString();
  }

  /**
   * The keys of a mapping, with merge keys ({@code <<}) expanded. {@code visiting} guards against a
   * mapping that merges itself through an alias.
   */
  private Map<String, NodeTuple> entriesOf(MappingNode node, Set<Node> visiting) {
    if (!visiting.add(node)) {
      throw new ConfigException(
          source, lineOf(node), path.isEmpty() ? null : path, "merges itself through <<");
    }
    Map<String, NodeTuple> own = new LinkedHashMap<>();
    List<Node> merged = new ArrayList<>();
    for (NodeTuple t : node.getValue()) {
      Node k = t.getKeyNode();
      if (Tag.MERGE.equals(k.getTag())) {
        merged.add(t.getValueNode());
        continue;
      }
      if (!(k instanceof ScalarNode s)) {
        throw new ConfigException(
            source,
            lineOf(k),
            path.isEmpty() ? null : path,
            "has a key that is " + kind(k) + ", not a string");
      }
      NodeTuple first = own.putIfAbsent(s.getValue(), t);
      if (first != null) {
        throw new ConfigException(
            source,
            lineOf(k),
            qualified(s.getValue()),
            "appears twice in the same mapping (first on line " + lineOf(first.getKeyNode()) + ")");
      }
    }
    // YAML's merge rule: keys of the mapping itself win, then earlier merged mappings.
    for (Node m : merged) {
      List<Node> sources = m instanceof SequenceNode seq ? seq.getValue() : List.of(m);
      for (Node s : sources) {
        if (!(s instanceof MappingNode sm)) {
          throw new ConfigException(
              source,
              lineOf(s),
              path.isEmpty() ? null : path,
              "can merge (<<) only mappings, not " + kind(s));
        }
        entriesOf(sm, visiting).forEach(own::putIfAbsent);
      }
    }
    visiting.remove(node);
    return own;
  }

  private static boolean isNull(Node n) {
    return n instanceof ScalarNode && Tag.NULL.equals(n.getTag());
  }

  static int lineOf(Node n) {
    return n.getStartMark().getLine() + 1;
  }

  /** How messages name what was found instead: {@code a list}, {@code a mapping}, {@code 'yes'}. */
  private static String kind(Node n) {
    if (n instanceof MappingNode) {
      return "a mapping";
    }
    if (n instanceof SequenceNode) {
      return "a list";
    }
    return quote(((ScalarNode) n).getValue());
  }

  /** A value quoted on one line and cut short, so a message stays one sentence. */
  private static String quote(String value) {
    String s = value.strip().replaceAll("\\s+", " ");
    if (s.length() > MAX_QUOTED_LENGTH) {
      s = s.substring(0, MAX_QUOTED_LENGTH).stripTrailing() + "...";
    }
    return "'" + s + "'";
  }
}
