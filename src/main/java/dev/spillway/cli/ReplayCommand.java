package dev.spillway.cli;

import dev.spillway.buffers.BufferPipeline;
import dev.spillway.config.DurationText;
import dev.spillway.config.SpillwayConfig;
import dev.spillway.event.Pipeline;
import dev.spillway.event.Topics;
import dev.spillway.lfk.LfkConfig;
import dev.spillway.lfk.LfkPipeline;
import dev.spillway.lfk.LooseForeignKey;
import dev.spillway.ops.DeadLetterReplay;
import dev.spillway.ops.DeadLetterReplay.Fate;
import dev.spillway.ops.DeadLetterReplay.Letter;
import dev.spillway.runtime.WorkingDirectory;
import java.io.PrintWriter;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.format.DateTimeParseException;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.Callable;
import java.util.function.Predicate;
import picocli.CommandLine.Command;
import picocli.CommandLine.ITypeConverter;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.ParentCommand;
import picocli.CommandLine.Spec;
import picocli.CommandLine.TypeConversionException;

/** {@code spillway replay …}: hand dead-lettered batches over again. */
@Command(
    name = "replay",
    description = "Hand a pipeline's dead-lettered batches to its workers again.",
    subcommands = {ReplayCommand.Buffers.class, ReplayCommand.Lfk.class})
final class ReplayCommand implements Runnable {
  /**
   * How long a signal waits for the replay to record what Kafka took and say so before the JVM
   * exits: the replay's own wait for Kafka's answers, and time to write them down.
   */
  private static final Duration SIGNAL_WIND_UP =
      DeadLetterReplay.STOPPED_ANSWER_WAIT.plusSeconds(10);

  @ParentCommand SpillwayCommand root;
  @Spec CommandSpec spec;

  @Override
  public void run() {
    throw CommandGroup.missingCommand(spec);
  }

  /** The options every pipeline's replay takes. */
  static final class Options {
    @Option(
        names = "--since",
        paramLabel = "TIME",
        converter = SinceConverter.class,
        description =
            "Only what was dead-lettered at or after TIME: an instant (2026-11-24T08:00:00Z) or a"
                + " time ago (30m, 2h, 1d). Default: everything still in the dead-letter topic.")
    Instant since;

    @Option(
        names = {"-n", "--dry-run"},
        description = "List what would be replayed; send nothing.")
    boolean dryRun;

    @Option(
        names = "--again",
        description =
            "Hand over also what an earlier replay handed over (by default such dead letters are"
                + " listed and skipped).")
    boolean again;

    @Option(names = "--json", description = "Print the dead letters as JSON.")
    boolean json;
  }

  @Command(
      name = "buffers",
      description =
          "Replay dead-lettered buffer batches: each is handed to its handler again with the same"
              + " group id (of a letter whose rows were kept, the rows still buffered).")
  static final class Buffers implements Callable<Integer> {
    @ParentCommand ReplayCommand replay;
    @Spec CommandSpec spec;
    @Mixin Options options;

    @Option(
        names = "--buffer",
        paramLabel = "NAME",
        description = "Only this buffer's batches (default: every configured buffer's).")
    String buffer;

    @Override
    public Integer call() throws Exception {
      SpillwayConfig config = Launch.config(replay.root);
      BufferPipeline pipeline = BufferPipeline.fromConfig(config);
      if (buffer != null && pipeline.buffers().stream().noneMatch(b -> b.name().equals(buffer))) {
        throw BuffersCommand.notABuffer(spec, "--buffer " + buffer, pipeline.buffers());
      }
      Topics topics = new Topics(config.kafka().topicPrefix());
      return ReplayCommand.replay(
          spec,
          config,
          options,
          Pipeline.BUFFERS,
          pipeline.deadLetterBatches(topics),
          buffer == null ? name -> true : buffer::equals,
          "events",
          pipeline.buffers().isEmpty() ? "buffers" : null);
    }
  }

  @Command(
      name = "lfk",
      description =
          "Replay dead-lettered cleanup batches: their children are cleaned up again (every"
              + " statement is idempotent).")
  static final class Lfk implements Callable<Integer> {
    @ParentCommand ReplayCommand replay;
    @Spec CommandSpec spec;
    @Mixin Options options;

    @Option(
        names = "--table",
        paramLabel = "TABLE",
        description = "Only batches of this parent table (table or schema.table).")
    String table;

    @Override
    public Integer call() throws Exception {
      SpillwayConfig config = Launch.config(replay.root);
      Topics topics = new Topics(config.kafka().topicPrefix());
      String only = table == null ? null : TableArgument.parse(spec, "--table", table).toString();
      List<LooseForeignKey> definitions = LfkConfig.from(config).definitions();
      if (only != null) {
        // A batch of a table no definition has as parent would clean nothing.
        List<String> parents = LfkPipeline.parents(definitions);
        if (!parents.contains(only)) {
          throw new ParameterException(
              spec.commandLine(),
              "--table "
                  + table
                  + " is not the parent table of a loose foreign key of the configuration"
                  + (parents.isEmpty()
                      ? ", which has none"
                      : " (parents: " + String.join(", ", parents) + ")"));
        }
      }
      return ReplayCommand.replay(
          spec,
          config,
          options,
          Pipeline.LFK,
          LfkPipeline.deadLetterBatches(topics, definitions),
          only == null ? name -> true : only::equals,
          "deleted rows",
          definitions.isEmpty() ? "loose foreign keys" : null);
    }
  }

  private static int replay(
      CommandSpec spec,
      SpillwayConfig config,
      Options options,
      Pipeline pipeline,
      DeadLetterReplay.Batches batches,
      Predicate<String> only,
      String unit,
      String noneConfigured)
      throws Exception {
    Topics topics = new Topics(config.kafka().topicPrefix());
    String dlq = topics.dlq(pipeline);
    String bootstrap =
        Launch.kafka(config, WorkingDirectory.running(config.workingDir()), "the dead letters");
    List<Letter> letters;
    // Ctrl+C: what Kafka took so far is recorded before the JVM exits, so replaying again hands
    // over only the rest.
    try (OnSignal signal = OnSignal.interruptingThisThread(SIGNAL_WIND_UP)) {
      try {
        letters =
            DeadLetterReplay.replay(
                bootstrap,
                config.kafka().properties(),
                config.kafka().replicationFactor(),
                dlq,
                topics.replays(pipeline),
                batches,
                new DeadLetterReplay.Request(options.since, only, options.dryRun, options.again));
      } catch (DeadLetterReplay.IncompleteReplay e) {
        if (e.stopped()) {
          PrintWriter err = spec.commandLine().getErr();
          err.println(stopped(dlq, e.taken(), e.unrecorded()));
          err.flush();
          return ErrorHandler.FAILURE;
        }
        throw new IllegalStateException(incomplete(e), e.getCause());
      }
      // Printed before the hold ends: a signal as the replay ends must not cut its listing off.
      PrintWriter out = spec.commandLine().getOut();
      if (options.json) {
        out.println(JsonOut.of(letters.stream().map(JsonLetter::of).toList()));
      } else {
        out.print(render(dlq, letters, unit, options.dryRun));
      }
      out.flush();
      if (noneConfigured != null && !letters.isEmpty()) {
        PrintWriter err = spec.commandLine().getErr();
        err.println(noneConfigured(config, noneConfigured));
        err.flush();
        // A replay that could hand nothing back under the configuration given is no success for
        // a script to go on from; a dry run only looked.
        return options.dryRun ? ErrorHandler.OK : ErrorHandler.USAGE;
      }
      return ErrorHandler.OK;
    }
  }

  /**
   * What a replay stopped part-way (a signal) did, and what replaying again does.
   *
   * @param recorded batches handed over and recorded as replayed
   * @param unanswered batches sent that Kafka did not say in time it took and recorded, or whose
   *     record of replay it refused
   */
  static String stopped(String dlq, int recorded, int unanswered) {
    String head = "Replay stopped before the end of " + dlq + ": ";
    if (unanswered == 0) {
      return head
          + (recorded == 0
              ? "no batch was handed over."
              : Count.of(recorded, "batch", "batches")
                  + " handed over and recorded as replayed, so replaying again hands over the"
                  + " rest.");
    }
    return head
        + (recorded == 0
            ? "no batch recorded as replayed; "
            : Count.of(recorded, "batch", "batches") + " handed over and recorded as replayed; ")
        + Count.of(unanswered, "batch", "batches")
        + " sent "
        + (unanswered == 1 ? "is" : "are")
        + " not recorded as replayed (Kafka did not answer within "
        + DeadLetterReplay.STOPPED_ANSWER_WAIT.toSeconds()
        + " s, or refused "
        + (unanswered == 1 ? "its" : "their")
        + " record), so replaying again hands over the rest and may hand "
        + (unanswered == 1 ? "that one" : "those")
        + " over twice, with the same group ids.";
  }

  /**
   * What a replay Kafka did not wholly take did: which batches run, and what a next replay does.
   */
  static String incomplete(DeadLetterReplay.IncompleteReplay e) {
    if (e.unrecorded() > 0) {
      boolean all = e.unrecorded() == e.taken();
      return "Kafka took "
          + Count.of(e.taken(), "replayed batch", "replayed batches")
          + " but could not record "
          + (all ? "them" : e.unrecorded() + " of them")
          + " as replayed ("
          + e.getMessage()
          + "); they run, and replaying again hands "
          + (all ? "them" : e.unrecorded() == 1 ? "that one" : "those " + e.unrecorded())
          + " over twice, with the same group ids."
          + (e.failed() == 0
              ? ""
              : " It did not take " + e.failed() + " more, which replaying again hands over.");
    }
    return "Kafka did not take "
        + e.failed()
        + " of "
        + (e.taken() + e.failed())
        + " replayed batches ("
        + e.getMessage()
        + "); the "
        + e.taken()
        + (e.taken() == 1 ? " it took runs and is" : " it took run and are")
        + " recorded as replayed, so replaying again hands over only the rest.";
  }

  /**
   * Why every batch was left when the configuration has none of the pipeline's {@code entities}:
   * most likely not the one the batches ran under.
   */
  static String noneConfigured(SpillwayConfig config, String entities) {
    return "The configuration ("
        + (config.source() == null
            ? "the embedded defaults: no -c given, and no spillway.yml in this directory"
            : config.source().toString())
        + ") has no "
        + entities
        + ", so no batch can be handed back: give the one the batches were dead-lettered under"
        + " with -c.";
  }

  /** What was replayed (or would be) and what was left, a line per dead letter. */
  static String render(String dlq, List<Letter> letters, String unit, boolean dryRun) {
    StringBuilder s = new StringBuilder();
    List<Letter> replayed =
        letters.stream()
            .filter(l -> l.fate() == Fate.REPLAYED || l.fate() == Fate.WOULD_REPLAY)
            .toList();
    List<Letter> before = letters.stream().filter(l -> l.fate() == Fate.REPLAYED_BEFORE).toList();
    List<Letter> left = letters.stream().filter(l -> l.fate() == Fate.LEFT).toList();
    if (letters.isEmpty()) {
      return "No dead letters to replay in " + dlq + ".\n";
    }
    if (!replayed.isEmpty()) {
      long size = replayed.stream().mapToLong(Letter::size).sum();
      s.append(dryRun ? "Would replay " : "Replayed ")
          .append(Count.of(replayed.size(), "batch", "batches"))
          .append(" (")
          .append(Count.of(size, singular(unit), unit))
          .append(") from ")
          .append(dlq)
          .append(":\n");
      for (Letter l : replayed) {
        batchLine(s, l, unit).append("  -> ").append(l.sentTo()).append(because(l.error()));
        s.append('\n');
      }
    }
    if (!before.isEmpty()) {
      s.append("Skipped ")
          .append(Count.of(before.size(), "batch", "batches"))
          .append(" an earlier replay handed over (--again hands them over once more):\n");
      for (Letter l : before) {
        batchLine(s, l, unit).append("  replayed at ").append(l.replayedAt()).append('\n');
      }
    }
    if (!left.isEmpty()) {
      s.append("Left ")
          .append(Count.of(left.size(), "dead letter", "dead letters"))
          .append(" that cannot be replayed:\n");
      for (Letter l : left) {
        s.append("  ")
            .append(l.position())
            .append("  ")
            .append(l.failedAt())
            .append("  ")
            .append(l.left())
            .append(because(l.error()))
            .append('\n');
      }
    }
    return s.toString();
  }

  /** A batch's dead letter: position, time, buffer or table, size. */
  private static StringBuilder batchLine(StringBuilder s, Letter l, String unit) {
    return s.append("  ")
        .append(l.position())
        .append("  ")
        .append(l.failedAt())
        .append("  ")
        .append(l.entity())
        .append("  ")
        .append(Count.of(l.size(), singular(unit), unit));
  }

  /** {@code events} → {@code event}, {@code deleted rows} → {@code deleted row}. */
  private static String singular(String unit) {
    return unit.endsWith("s") ? unit.substring(0, unit.length() - 1) : unit;
  }

  /**
   * The dead letter's error in brackets, on one line (PostgreSQL's hint and position lines joined
   * to it), cut at 200 characters; nothing when it has none.
   */
  static String because(String error) {
    error = error.strip().replaceAll("\\s*\\R\\s*", " ");
    if (error.isEmpty()) {
      return "";
    }
    return "  (" + (error.length() <= 200 ? error : error.substring(0, 197) + "...") + ")";
  }

  /** {@code --since}: an ISO-8601 instant, or a duration meaning that long ago. */
  static final class SinceConverter implements ITypeConverter<Instant> {
    private final Clock clock;

    SinceConverter() {
      this(Clock.systemUTC());
    }

    SinceConverter(Clock clock) {
      this.clock = clock;
    }

    @Override
    public Instant convert(String value) {
      try {
        Instant since = Instant.parse(value.trim());
        if (since.isBefore(Instant.EPOCH)) {
          throw beforeEpoch(value);
        }
        return since;
      } catch (DateTimeParseException e) {
        Optional<Duration> ago = DurationText.parse(value);
        if (ago.isPresent() && !ago.get().isNegative()) {
          Instant now = clock.instant();
          // Compared, not subtracted first: an instant that long ago may not exist at all.
          if (ago.get().compareTo(Duration.between(Instant.EPOCH, now)) > 0) {
            throw beforeEpoch(value);
          }
          return now.minus(ago.get());
        }
      }
      throw new TypeConversionException(
          "'"
              + value
              + "' is neither an instant such as 2026-11-24T08:00:00Z nor a time ago such as 30m,"
              + " 2h or 1d");
    }

    /** Kafka finds records by time from 1970 on only. */
    private static TypeConversionException beforeEpoch(String value) {
      return new TypeConversionException(
          "'" + value + "' is before 1970-01-01T00:00:00Z, where Kafka's record times begin");
    }
  }

  /** A dead letter in {@code --json}: its times as ISO-8601 text. */
  record JsonLetter(
      String position,
      String failedAt,
      String error,
      String entity,
      int size,
      String sentTo,
      String fate,
      String left,
      String replayedAt) {
    static JsonLetter of(Letter l) {
      return new JsonLetter(
          l.position(),
          l.failedAt().toString(),
          l.error(),
          l.entity(),
          l.size(),
          l.sentTo(),
          l.fate().name().toLowerCase(java.util.Locale.ROOT),
          l.left(),
          l.replayedAt() == null ? null : l.replayedAt().toString());
    }
  }
}
