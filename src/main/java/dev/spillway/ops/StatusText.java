package dev.spillway.ops;

import dev.spillway.ops.StatusReport.LagStatus;
import java.time.Duration;
import java.time.Instant;
import java.util.List;

/** A status report for people: what {@code status} prints and the dashboard shows. */
public final class StatusText {
  /** A report older than this is said to be: a newer one is late. */
  private static final Duration LATE = Duration.ofSeconds(5);

  private StatusText() {}

  public static String render(StatusReport r, Instant now) {
    StringBuilder b = new StringBuilder();
    b.append(String.format("Spillway pid %d, running since %s%n", r.pid(), r.startedAt()));
    if (r.madeAt() != null) {
      Instant made = Instant.parse(r.madeAt());
      if (Duration.between(made, now).compareTo(LATE) >= 0) {
        b.append(
            String.format(
                "Report    made at %s (%s ago); a newer one is still being made (a database slow to"
                    + " answer?)%n",
                made, ago(made, now)));
      }
    }
    if (r.failure() != null) {
      b.append("FAILED: ").append(r.failure()).append(System.lineSeparator());
    }
    b.append(
        String.format(
            "Kafka     %s%s%n",
            r.kafka().bootstrapServers(), r.kafka().embedded() ? " (embedded)" : ""));
    for (StatusReport.DatabaseStatus d : r.databases()) {
      b.append(
          String.format(
              "Database  %-8s %s%s%n", d.name(), d.url(), d.embedded() ? " (embedded)" : ""));
      if (d.error() != null) {
        b.append("          slots unreadable: ").append(d.error()).append(System.lineSeparator());
      }
      if (d.captureStandingBySince() != null) {
        Instant since = Instant.parse(d.captureStandingBySince());
        b.append(
            String.format(
                "          capture stands by since %s (%s ago): its slot streams to another"
                    + " instance; this one takes it over once that one lets it go%n",
                since, ago(since, now)));
      }
      if (d.kafkaWait() != null) {
        Instant since = Instant.parse(d.kafkaWait().since());
        b.append(
            String.format(
                "          capture waits for Kafka since %s (%s ago): %s; its changes stay in"
                    + " the slot and are sent again until Kafka takes them%n",
                since,
                ago(since, now),
                d.kafkaWait().reason() == null
                    ? "no answer from Kafka yet"
                    : d.kafkaWait().reason()));
      }
      for (StatusReport.SlotStatus s : d.slots()) {
        String risk = "";
        if (s.invalidated() != null) {
          risk = ", INVALIDATED by the server (" + s.invalidated() + ")";
        } else if (s.safeWalBytes() != null && s.safeWalBytes() == 0) {
          risk = ", to be invalidated at the next checkpoint unless it catches up";
        } else if (s.safeWalBytes() != null) {
          risk = ", invalidated after " + Bytes.human(s.safeWalBytes()) + " more";
        }
        b.append(
            String.format(
                "          slot %-24s %-8s WAL held %s%s%s%n",
                s.slot(),
                s.active() ? "active" : "inactive",
                Bytes.human(s.walHeldBytes()),
                risk,
                s.ours() ? "" : " (not this installation's)"));
      }
    }
    for (StatusReport.HealthStatus h : r.health()) {
      b.append(
          String.format(
              "Health    %-40s %-8s %s%n",
              h.table() == null ? h.database() : h.database() + " " + h.table(),
              h.state(),
              h.reason()));
    }
    for (StatusReport.SinkStatus s : r.sinks()) {
      b.append(
          String.format(
              "Sink      %-10s rows %,d  requeued %,d  delayed %,d  dead-lettered %,d  paused partitions %d%n",
              s.pipeline(),
              s.rows(),
              s.requeued(),
              s.delayed(),
              s.deadLettered(),
              s.pausedPartitions()));
    }
    for (StatusReport.BufferStatus s : r.buffers()) {
      b.append(
          String.format(
              "Buffer    %-24s rows waiting %s  batches in flight %d  handled %,d  DLQ %,d batches (%,d events)%s%s  insert->handled p50 %s p99 %s%s%n",
              s.name(),
              s.rowsWaiting() < 0 ? "?" : RowCount.text(s.rowsWaiting()),
              s.batchesInFlight(),
              s.handledEvents(),
              s.deadLetteredBatches(),
              s.deadLetteredEvents(),
              s.tooLargeRows() == 0
                  ? ""
                  : String.format(
                      ", %,d %s too large for Kafka",
                      s.tooLargeRows(), s.tooLargeRows() == 1 ? "row" : "rows"),
              s.unreadableEvents() == 0
                  ? ""
                  : String.format(
                      ", %,d unreadable %s",
                      s.unreadableEvents(), s.unreadableEvents() == 1 ? "event" : "events"),
              millis(s.insertToHandledP50Millis()),
              millis(s.insertToHandledP99Millis()),
              s.republishedEvents() == 0
                  ? ""
                  : String.format(
                      "  passed over %,d inserts published twice", s.republishedEvents())));
    }
    if (r.lagReadAt() == null) {
      b.append("Lag       not read from Kafka yet, or Kafka cannot be read")
          .append(System.lineSeparator());
    } else {
      b.append("Lag       read at ").append(r.lagReadAt()).append(System.lineSeparator());
      for (String line : lag(r.lag(), now).split("\\R")) {
        b.append("  ").append(line).append(System.lineSeparator());
      }
    }
    if (r.capture().isEmpty()
        && r.databases().stream().anyMatch(d -> d.captureStandingBySince() != null)) {
      b.append("Capture   none in this process yet: it stands by for another instance (above)")
          .append(System.lineSeparator());
    } else if (r.capture().isEmpty() && r.captureStarting()) {
      b.append(
              "Capture   starting: its slots and publications are being set up, nothing captured yet")
          .append(System.lineSeparator());
    } else if (r.capture().isEmpty()) {
      b.append("Capture   nothing configured to capture").append(System.lineSeparator());
    } else {
      b.append("Captured changes since start").append(System.lineSeparator());
      for (StatusReport.CaptureCount c : r.capture()) {
        b.append(
            String.format(
                "  %-8s %-40s %-7s %,12d%n", c.database(), c.table(), c.operation(), c.changes()));
      }
    }
    return b.toString();
  }

  /** Each consumer group's lag per topic, as a table ({@code lag} and {@code status}). */
  public static String lag(List<LagStatus> lags, Instant now) {
    if (lags.isEmpty()) {
      return "No consumer groups of Spillway's in Kafka yet.\n";
    }
    int group = "GROUP".length();
    int topic = "TOPIC".length();
    for (LagStatus l : lags) {
      group = Math.max(group, l.group().length());
      topic = Math.max(topic, l.topic().length());
    }
    String row = "%-" + group + "s  %-" + topic + "s  %10s  %14s  %7s%n";
    StringBuilder s = new StringBuilder();
    s.append(String.format(row, "GROUP", "TOPIC", "LAG", "OLDEST WAITING", "MEMBERS"));
    for (LagStatus l : lags) {
      // "?": records wait whose oldest could not be read in time.
      String age =
          l.oldestWaitingSince() != null
              ? ago(Instant.parse(l.oldestWaitingSince()), now)
              : l.lag() > 0 ? "?" : "-";
      s.append(String.format(row, l.group(), l.topic(), l.lag(), age, l.members()));
    }
    return s.toString();
  }

  /** {@code 45s}, {@code 3m 12s}, {@code 2h 05m}, {@code 3d 04h}. */
  public static String age(long seconds) {
    if (seconds < 60) {
      return seconds + "s";
    }
    if (seconds < 3600) {
      return String.format("%dm %02ds", seconds / 60, seconds % 60);
    }
    if (seconds < 86_400) {
      return String.format("%dh %02dm", seconds / 3600, seconds % 3600 / 60);
    }
    return String.format("%dd %02dh", seconds / 86_400, seconds % 86_400 / 3600);
  }

  private static String ago(Instant since, Instant now) {
    return age(Math.max(0, Duration.between(since, now).toSeconds()));
  }

  /** Milliseconds rounded, or "-" when there is no figure. */
  private static String millis(Double ms) {
    return ms == null ? "-" : String.format("%.0f ms", ms);
  }
}
