package dev.spillway.buffers;

import dev.spillway.config.ConfigNode;
import dev.spillway.config.DatabaseConfig;
import dev.spillway.config.DurationText;
import dev.spillway.config.SpillwayConfig;
import dev.spillway.event.TableName;
import dev.spillway.event.Topics;
import java.lang.reflect.Modifier;
import java.net.URI;
import java.net.URISyntaxException;
import java.net.http.HttpRequest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * Reads the {@code buffers:} section: one mapping per buffer table, keyed by the buffer's name.
 * Every problem is a {@code ConfigException} naming file, line and key, raised before anything
 * starts.
 *
 * <pre>{@code
 * buffers:
 *   contact_activity_events:
 *     batch-size: 1000
 *     max-wait: 2s
 *     handler:
 *       http: { url: "http://crm.local/bulk", timeout: 10s, headers: { Authorization: "..." } }
 * }</pre>
 */
public final class BuffersSection {
  private static final Pattern NAME = Pattern.compile("[a-zA-Z0-9._-]+");

  /**
   * The kinds of handler, in the order messages name them, each with what it lacks when given
   * empty.
   */
  private static final Map<String, String> WHAT_EACH_KIND_TAKES = new LinkedHashMap<>();

  static {
    WHAT_EACH_KIND_TAKES.put("http", "its settings, { url: … }");
    WHAT_EACH_KIND_TAKES.put("sql", "the statement");
    WHAT_EACH_KIND_TAKES.put("class", "the handler's class name");
  }

  private static final List<String> KINDS = List.copyOf(WHAT_EACH_KIND_TAKES.keySet());

  private BuffersSection() {}

  /** The configured buffers in file order; empty when the section is absent. */
  public static List<BufferSettings> read(SpillwayConfig config) {
    ConfigNode section = config.pipelineSection("buffers");
    List<BufferSettings> out = new ArrayList<>();
    // A table is one per database: shards with the same schema each have a buffer of their own.
    Map<List<Object>, String> tables = new HashMap<>();
    // Kafka takes '.' and '_' in topic names as one: orders.eu's topics and orders_eu's collide.
    Map<String, String> kafkaNames = new HashMap<>();
    // Each buffer's Kafka Streams state is kept in a directory named after it, which a file system
    // ignoring case (macOS's, Windows') would share between Orders and orders.
    Map<String, String> directoryNames = new HashMap<>();
    for (String name : section.keys()) {
      ConfigNode n =
          section
              .child(name)
              .orElseThrow(() -> section.error(name, "must be a mapping of the buffer's settings"));
      if (!NAME.matcher(name).matches()) {
        throw section.error(name, "is not a usable buffer name (letters, digits, '.', '_', '-')");
      }
      if (Topics.namesOwnGroup(name)) {
        throw section.error(
            name,
            "is not a usable buffer name: its batching stage would join the buffers' own consumer"
                + " group <prefix>.buffers."
                + name
                + " in Kafka; name the buffer otherwise");
      }
      int longest =
          BufferTopology.topicNames(new Topics(config.kafka().topicPrefix()), name).stream()
              .mapToInt(String::length)
              .max()
              .orElse(0);
      if (longest > Topics.MAX_NAME_LENGTH) {
        throw section.error(
            name,
            "would give the buffer's Kafka topics names of up to "
                + longest
                + " characters, where Kafka takes at most "
                + Topics.MAX_NAME_LENGTH
                + "; shorten the buffer's name");
      }
      String clash = kafkaNames.putIfAbsent(name.replace('.', '_'), name);
      if (clash != null) {
        throw section.error(
            name,
            "would give the buffer Kafka topics that collide with buffer "
                + clash
                + "'s (Kafka takes '.' and '_' as one in topic names); name the buffer otherwise");
      }
      String sameLetters = directoryNames.putIfAbsent(name.toLowerCase(Locale.ROOT), name);
      if (sameLetters != null) {
        throw section.error(
            name,
            "differs from buffer "
                + sameLetters
                + " only in case, so both would keep their state in one directory where file"
                + " names ignore case (macOS, Windows); name the buffer otherwise");
      }
      BufferSettings b = buffer(name, n, config);
      String other = tables.putIfAbsent(List.of(b.database(), b.table()), name);
      if (other != null) {
        throw n.error(
            "table",
            "is the same table as buffer " + other + "'s, in the same database " + b.database());
      }
      out.add(b);
    }
    section.finish();
    return List.copyOf(out);
  }

  private static BufferSettings buffer(String name, ConfigNode n, SpillwayConfig config) {
    n.only(
        "table",
        "database",
        "batch-size",
        "max-wait",
        "handler",
        "max-attempts",
        "retry-backoff",
        "on-exhausted",
        "archive-table",
        "max-in-flight",
        "rate-limit");
    TableName table = tableName(n, "table", name);
    String database = n.string("database", config.databaseOf(table.toString()));
    if (!config.databaseNames().contains(database)) {
      throw n.error(
          "database",
          "names database '"
              + database
              + "', which is not configured (known: "
              + String.join(", ", config.databaseNames())
              + ")");
    }
    int batchSize = n.integer("batch-size", BufferSettings.DEFAULT_BATCH_SIZE, 1, 1_000_000);
    Duration maxWait = n.positiveDuration("max-wait", BufferSettings.DEFAULT_MAX_WAIT);
    HandlerSpec handler =
        handler(
            n.child("handler")
                .orElseThrow(() -> n.error("handler", "is required: one of http, sql and class")));
    int maxAttempts = n.integer("max-attempts", BufferSettings.DEFAULT_MAX_ATTEMPTS, 1, 1000);
    Duration backoff = n.positiveDuration("retry-backoff", BufferSettings.DEFAULT_RETRY_BACKOFF);
    if (backoff.compareTo(BufferSettings.MAX_RETRY_BACKOFF) > 0) {
      throw n.error(
          "retry-backoff",
          "must be at most "
              + DurationText.format(BufferSettings.MAX_RETRY_BACKOFF)
              + ", the longest it doubles to, not "
              + DurationText.format(backoff));
    }
    OnExhausted onExhausted = onExhausted(n, handler);
    Optional<TableName> archive =
        n.has("archive-table")
            ? Optional.of(tableName(n, "archive-table", null))
            : Optional.empty();
    if (archive.isPresent() && archive.get().equals(table)) {
      throw n.error("archive-table", "must not be the buffer table itself");
    }
    int maxInFlight = n.integer("max-in-flight", BufferSettings.DEFAULT_MAX_IN_FLIGHT, 1, 256);
    Optional<Double> rateLimit =
        n.has("rate-limit")
            ? Optional.of(n.decimal("rate-limit", 0, 0.001, 1_000_000))
            : Optional.empty();
    return new BufferSettings(
        name,
        table,
        database,
        batchSize,
        maxWait,
        handler,
        maxAttempts,
        backoff,
        onExhausted,
        archive,
        maxInFlight,
        rateLimit,
        new BufferSettings.Origin(n.source(), n.line(), n.path(), keyLines(n)));
  }

  /** Where the keys checked against the database are written, for the lines of its findings. */
  private static Map<String, Integer> keyLines(ConfigNode n) {
    Map<String, Integer> lines = new HashMap<>();
    for (String key : List.of("table", "archive-table", "handler")) {
      if (n.has(key)) {
        lines.put(key, n.line(key));
      }
    }
    return lines;
  }

  private static TableName tableName(ConfigNode n, String key, String dflt) {
    String written = dflt == null ? n.requiredString(key) : n.string(key, dflt);
    String[] parts = written.split("\\.", -1);
    if (parts.length > 2 || written.isBlank()) {
      throw n.error(
          key, "is not a table name (write table or schema.table), not '" + written + "'");
    }
    if (written.codePoints().anyMatch(TableName::blank)) {
      throw n.error(
          key,
          "names a table with a space in its name, '"
              + written
              + "', which Spillway does not take; rename the table");
    }
    for (String p : parts) {
      if (p.isEmpty()) {
        throw n.error(key, "is not a table name (write table or schema.table)");
      }
    }
    TableName name = TableName.parse(written);
    if (name.overlong().isPresent()) {
      throw n.error(
          key,
          name.overlong().get()
              + (n.has(key)
                  ? ""
                  : " (the buffer's name, which names its table when no " + key + " is given)"));
    }
    return name;
  }

  /**
   * {@code delete} unless written, but {@code keep} for an sql handler: its statement is given only
   * the ids and reads the rows from the table, which a replay of a batch whose rows were deleted
   * would find empty, a statement succeeding with nothing done.
   */
  private static OnExhausted onExhausted(ConfigNode n, HandlerSpec handler) {
    OnExhausted byDefault =
        handler instanceof HandlerSpec.Sql ? OnExhausted.KEEP : BufferSettings.DEFAULT_ON_EXHAUSTED;
    String v = n.string("on-exhausted", byDefault.name());
    try {
      return OnExhausted.valueOf(v.trim().toUpperCase(Locale.ROOT));
    } catch (IllegalArgumentException e) {
      throw n.error("on-exhausted", "must be delete or keep, not '" + v + "'");
    }
  }

  private static HandlerSpec handler(ConfigNode h) {
    h.only(KINDS.toArray(String[]::new)); // an unknown key explains more than "exactly one"
    long kinds = KINDS.stream().filter(h::has).count();
    if (kinds == 0) {
      for (String kind : KINDS) {
        if (h.keys().contains(kind)) {
          throw h.error(kind, "is empty: write " + WHAT_EACH_KIND_TAKES.get(kind));
        }
      }
    }
    if (kinds != 1) {
      throw h.invalid(
          kinds == 0
              ? "must name one of http, sql and class"
              : "must name exactly one of http, sql and class, not several");
    }
    HandlerSpec spec;
    if (h.has("http")) {
      spec = http(h.child("http").orElseThrow());
    } else if (h.has("sql")) {
      // The statement alone, or with its settings: { statement: "…", timeout: 30s }.
      ConfigNode at = h;
      String key = "sql";
      Duration timeout = Duration.ZERO;
      if (h.isMapping("sql")) {
        at = h.child("sql").orElseThrow();
        key = "statement";
        timeout = at.postgresTimeout("timeout", Duration.ZERO);
      }
      String sql = at.requiredString(key);
      if (!SqlParameters.parse(sql).uses("ids")) {
        throw at.error(
            key, "must use :ids, the array of the batch's ids, outside literals and comments");
      }
      if (at != h) {
        at.finish();
      }
      spec = new HandlerSpec.Sql(sql, timeout);
    } else {
      spec = javaClass(h, h.requiredString("class"));
    }
    return spec;
  }

  private static HandlerSpec http(ConfigNode n) {
    n.only("url", "headers", "timeout");
    String url = n.requiredString("url");
    URI uri = null;
    if (url.startsWith("http://") || url.startsWith("https://")) {
      try {
        uri = new URI(url);
      } catch (URISyntaxException e) {
        throw n.error(
            "url",
            "is not a URL ('"
                + DatabaseConfig.redacted(url)
                + "': "
                + e.getReason().toLowerCase(Locale.ROOT)
                + ")");
      }
    }
    if (uri == null || uri.getHost() == null) {
      throw n.error(
          "url",
          "must be an http:// or https:// URL with a host, not '"
              + DatabaseConfig.redacted(url)
              + "'");
    }
    if (uri.getPort() == 0 || uri.getPort() > 65535) {
      // Java's HTTP client refuses it at each call: every batch would be dead-lettered.
      throw n.error("url", "has port " + uri.getPort() + ", where a port is from 1 to 65535");
    }
    if (uri.getRawUserInfo() != null) {
      // Not shown: it may hold a password, which would also reach logs and dead letters.
      throw n.error(
          "url",
          "must not hold a user name or password, which Java's HTTP client never sends; give"
              + " them as a header, headers: { Authorization: \"Basic ${env:NAME}\" }");
    }
    Map<String, String> headers = n.stringMap("headers");
    headers.forEach(
        (name, value) -> {
          if (name.equalsIgnoreCase("Idempotency-Key") || name.equalsIgnoreCase("Content-Type")) {
            throw n.error("headers", "must not set " + name + ": Spillway sets it");
          }
          if (!sendable(name, "x")) {
            throw n.error(
                "headers",
                "must not set " + name + ": Java's HTTP client refuses that header name");
          }
          if (!sendable(name, value)) { // the value is left out of the sentence: it may be secret
            throw n.error(
                "headers",
                "has a value for "
                    + name
                    + " that Java's HTTP client refuses (a line break, or a character beyond"
                    + " Latin-1)");
          }
        });
    Duration timeout = n.positiveDuration("timeout", HandlerSpec.Http.DEFAULT_TIMEOUT);
    return new HandlerSpec.Http(uri, headers, timeout);
  }

  /** Whether Java's HTTP client sends this header: it refuses some names and values outright. */
  private static boolean sendable(String name, String value) {
    try {
      HttpRequest.newBuilder().header(name, value);
      return true;
    } catch (IllegalArgumentException e) {
      return false;
    }
  }

  private static HandlerSpec javaClass(ConfigNode h, String name) {
    Class<?> type;
    try {
      type = Class.forName(name.trim(), false, Thread.currentThread().getContextClassLoader());
    } catch (ClassNotFoundException e) {
      throw h.error("class", "names " + name + ", which is not on the class path");
    } catch (LinkageError e) {
      throw h.error("class", "names " + name + ", which could not be loaded: " + e);
    }
    if (!Modifier.isPublic(type.getModifiers())) {
      throw h.error("class", "names " + name + ", which is not public");
    }
    if (!BulkHandler.class.isAssignableFrom(type)) {
      throw h.error(
          "class", "names " + name + ", which does not implement " + BulkHandler.class.getName());
    }
    if (Modifier.isAbstract(type.getModifiers())) {
      throw h.error("class", "names " + name + ", which is abstract");
    }
    try {
      if (!Modifier.isPublic(type.getConstructor().getModifiers())) {
        throw new NoSuchMethodException();
      }
    } catch (NoSuchMethodException e) {
      throw h.error(
          "class", "names " + name + ", which has no public constructor without arguments");
    }
    return new HandlerSpec.JavaClass(type.asSubclass(BulkHandler.class));
  }
}
