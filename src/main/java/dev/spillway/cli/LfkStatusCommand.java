package dev.spillway.cli;

import dev.spillway.config.SpillwayConfig;
import dev.spillway.event.Topics;
import dev.spillway.lfk.LfkBacklog;
import dev.spillway.lfk.LfkConfig;
import dev.spillway.ops.StatusClient;
import dev.spillway.ops.StatusText;
import dev.spillway.runtime.RuntimeInfo;
import dev.spillway.runtime.WorkingDirectory;
import java.io.IOException;
import java.io.PrintWriter;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.concurrent.Callable;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParentCommand;
import picocli.CommandLine.Spec;

/**
 * {@code spillway lfk status}: per parent table, deleted records whose cleanup is pending, the age
 * of the oldest, how many of them are delayed after repeated attempts, how many wait in dead
 * letters for a replay, and how many the running process finished since it started.
 */
@Command(name = "status", description = "Show the loose-foreign-key backlog per parent table.")
final class LfkStatusCommand implements Callable<Integer> {
  private static final Pattern PROCESSED =
      Pattern.compile(
          "^loose_foreign_key_processed_deleted_records_total\\{database=\"((?:[^\"\\\\]|\\\\.)*)\",table=\"((?:[^\"\\\\]|\\\\.)*)\"} ([0-9.E]+)$",
          Pattern.MULTILINE);

  @ParentCommand LfkCommand lfk;
  @Spec CommandSpec spec;

  @Option(names = "--json", description = "Print the backlog as JSON.")
  boolean json;

  /** One parent table's line. */
  record Row(
      String database,
      String table,
      long pending,
      String oldestPending,
      Long oldestPendingSeconds,
      long rescheduled,
      long deadLettered,
      Long processed) {}

  @Override
  public Integer call() throws Exception {
    SpillwayConfig config = Launch.config(lfk.root);
    // A definition run refuses is said here too, rather than shown as nothing running.
    LfkConfig lfkConfig = LfkConfig.from(config);
    Optional<RuntimeInfo> running = WorkingDirectory.running(config.workingDir());
    String bootstrap = Launch.kafka(config, running, "the backlog");
    List<LfkBacklog.Parent> backlog =
        LfkBacklog.read(
            bootstrap,
            config.kafka().properties(),
            new Topics(config.kafka().topicPrefix()),
            lfkConfig.definitions());
    Optional<Map<String, Long>> processed = Optional.empty();
    String unread = null; // why the running process's counts could not be read
    if (running.isPresent()) {
      try {
        processed = Optional.of(processed(running.get().httpPort()));
      } catch (IOException e) {
        unread = e.getMessage(); // the backlog, read from Kafka, is shown all the same
      }
    }
    List<Row> rows = rows(backlog, processed, Instant.now());
    PrintWriter out = spec.commandLine().getOut();
    if (json) {
      out.println(JsonOut.of(rows));
      if (!running.isPresent() || unread != null) {
        // Why every processed count is null, beside the JSON rather than in it.
        spec.commandLine().getErr().println(processedNote(running.isPresent(), unread));
      }
    } else {
      out.print(render(rows, running.isPresent(), unread));
    }
    out.flush();
    return ErrorHandler.OK;
  }

  /**
   * @param processed the running process's counts by {@code database/table}, a parent it has none
   *     for having finished none; empty when no count could be read, each row's then null
   */
  static List<Row> rows(
      List<LfkBacklog.Parent> backlog, Optional<Map<String, Long>> processed, Instant now) {
    Map<String, Row> rows = new TreeMap<>();
    for (LfkBacklog.Parent p : backlog) {
      Long age =
          p.pending() == 0
              ? null
              : Math.max(0, now.getEpochSecond() - p.oldestCommitMicros() / 1_000_000);
      rows.put(
          p.database() + "/" + p.table(),
          new Row(
              p.database(),
              p.table(),
              p.pending(),
              age == null ? "-" : StatusText.age(age),
              age,
              p.rescheduled(),
              p.deadLettered(),
              processed.map(m -> m.getOrDefault(p.database() + "/" + p.table(), 0L)).orElse(null)));
    }
    processed
        .orElse(Map.of())
        .forEach(
            (key, n) -> {
              if (!rows.containsKey(key)) {
                int slash = key.indexOf('/');
                rows.put(
                    key,
                    new Row(
                        key.substring(0, slash), key.substring(slash + 1), 0, "-", null, 0, 0, n));
              }
            });
    return new ArrayList<>(rows.values());
  }

  /**
   * @param unread why the running process's PROCESSED counts could not be read, or null
   */
  static String render(List<Row> rows, boolean running, String unread) {
    StringBuilder b = new StringBuilder();
    if (rows.isEmpty()) {
      return "No deleted parent row waits for its cleanup.\n";
    }
    String format = "%-32s %-10s %10s %16s %12s %14s %10s%n";
    b.append(
        String.format(
            format,
            "PARENT TABLE",
            "DATABASE",
            "PENDING",
            "OLDEST PENDING",
            "RESCHEDULED",
            "DEAD-LETTERED",
            "PROCESSED"));
    for (Row r : rows) {
      b.append(
          String.format(
              format,
              r.table(),
              r.database(),
              r.pending(),
              r.oldestPending(),
              r.rescheduled(),
              r.deadLettered(),
              r.processed() == null ? "-" : r.processed()));
    }
    long deadLettered = rows.stream().mapToLong(Row::deadLettered).sum();
    if (deadLettered > 0) {
      b.append(deadLettered)
          .append(deadLettered == 1 ? " deleted row's" : " deleted rows'")
          .append(
              " children wait in dead letters: `bin/spillway replay lfk` hands their cleanups back"
                  + " once the cause is mended.\n");
    }
    return b.append(processedNote(running, unread)).append('\n').toString();
  }

  /** Where the PROCESSED counts come from, or why there are none. */
  static String processedNote(boolean running, String unread) {
    if (!running) {
      return "PROCESSED counts come from a running process; none runs here.";
    }
    return unread == null
        ? "PROCESSED counts since the running process started."
        : "PROCESSED counts could not be read from the running process: " + unread;
  }

  /** The processed counters from the running process's metrics, by database/table. */
  private static Map<String, Long> processed(int port) throws IOException, InterruptedException {
    HttpResponse<String> metrics = StatusClient.get(port, "/metrics", Duration.ofSeconds(10));
    if (metrics.statusCode() != 200) {
      throw new IOException(
          "it answered /metrics on port " + port + " with HTTP " + metrics.statusCode() + ".");
    }
    return processed(metrics.body());
  }

  /**
   * The processed counters in a Prometheus text page, by database/table; a label's value escapes
   * its quotes and backslashes ({@code o"rders} reads {@code o\"rders}).
   */
  static Map<String, Long> processed(String page) {
    Map<String, Long> out = new LinkedHashMap<>();
    Matcher m = PROCESSED.matcher(page);
    while (m.find()) {
      out.put(
          unescape(m.group(1)) + "/" + unescape(m.group(2)), (long) Double.parseDouble(m.group(3)));
    }
    return out;
  }

  private static String unescape(String labelValue) {
    StringBuilder b = new StringBuilder(labelValue.length());
    for (int i = 0; i < labelValue.length(); i++) {
      char c = labelValue.charAt(i);
      if (c == '\\' && i + 1 < labelValue.length()) {
        char next = labelValue.charAt(++i);
        b.append(next == 'n' ? '\n' : next);
      } else {
        b.append(c);
      }
    }
    return b.toString();
  }
}
