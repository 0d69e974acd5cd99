package dev.spillway.cli;

import dev.spillway.config.DurationText;
import dev.spillway.config.SpillwayConfig;
import dev.spillway.event.KafkaClients;
import dev.spillway.event.TableName;
import dev.spillway.event.TopicProvisioner;
import dev.spillway.event.Topics;
import dev.spillway.lfk.CheckedKey;
import dev.spillway.lfk.DefinitionCheck;
import dev.spillway.lfk.LfkConfig;
import dev.spillway.lfk.LooseForeignKey;
import dev.spillway.lfk.OrphanSweep;
import dev.spillway.runtime.WorkingDirectory;
import java.io.PrintWriter;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.stream.Collectors;
import org.apache.kafka.clients.producer.Producer;
import picocli.CommandLine.Command;
import picocli.CommandLine.ITypeConverter;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ParentCommand;
import picocli.CommandLine.Spec;
import picocli.CommandLine.TypeConversionException;

/**
 * {@code spillway lfk sweep}: finds parent rows deleted while capture did not read their deletes
 * (child rows still refer to them) and hands them to the cleanup as deleted records.
 */
@Command(
    name = "sweep",
    description = {
      "Find child rows whose parent row is gone (deletes capture missed, such as while its"
          + " replication slot was lost) and hand those parents to the cleanup.",
      "PARENTs (table or schema.table) limit the sweep to their loose foreign keys."
    })
final class LfkSweepCommand implements Callable<Integer> {
  /** How many ids of a parent a line shows before it says how many more there are. */
  private static final int SHOWN_IDS = 10;

  @ParentCommand LfkCommand lfk;
  @Spec CommandSpec spec;

  @Option(
      names = {"-n", "--dry-run"},
      description = "Report what was found; hand nothing to the cleanup.")
  boolean dryRun;

  @Option(
      names = "--chunk",
      paramLabel = "N",
      defaultValue = "1000",
      description =
          "Distinct child values read, and parent ids looked up, per statement (${DEFAULT-VALUE}).")
  int chunk;

  @Option(
      names = "--recheck-after",
      paramLabel = "DURATION",
      defaultValue = "2s",
      converter = Durations.class,
      description =
          "How long after the transactions begun before the first look have ended the ids found"
              + " missing are looked up again; only those still missing count (${DEFAULT-VALUE}).")
  Duration recheckAfter;

  @Option(
      names = "--force",
      description =
          "Hand over also when a parent table lacks every id its children refer to (refused by"
              + " default: more likely tables: names the wrong database than all were deleted).")
  boolean force;

  @Option(names = "--json", description = "Print what was found as JSON.")
  boolean json;

  @Parameters(paramLabel = "PARENT", arity = "0..*")
  List<String> parents = new ArrayList<>();

  @Override
  public Integer call() throws Exception {
    if (chunk < 1) {
      throw new ParameterException(spec.commandLine(), "--chunk must be at least 1");
    }
    SpillwayConfig config = Launch.config(lfk.root);
    List<LooseForeignKey> definitions = selected(LfkConfig.from(config).definitions());
    Topics topics = new Topics(config.kafka().topicPrefix());
    PrintWriter out = spec.commandLine().getOut();
    if (definitions.isEmpty()) {
      // Nothing to ask a database or Kafka: an embedded database is not started (or made) for it.
      report(out, new OrphanSweep.Result(List.of(), Map.of()), null, topics);
      return ErrorHandler.OK;
    }
    String bootstrap =
        dryRun
            ? null
            : Launch.kafka(
                config,
                WorkingDirectory.running(config.workingDir()),
                "the topic the cleanup reads");
    OrphanSweep.Result result;
    try (Catalogs catalogs = Catalogs.open(config)) {
      DefinitionCheck.Result checked =
          DefinitionCheck.check(definitions, config::databaseOf, catalogs.databases()::dataSource);
      PrintWriter notes = spec.commandLine().getErr(); // the report alone on stdout
      checked.warnings().forEach(w -> notes.printf("warning: %s%n", w));
      notes.flush();
      result =
          OrphanSweep.find(
              checked.keys(),
              catalogs.databases()::dataSource,
              chunk,
              recheckAfter,
              d -> Thread.sleep(d.toMillis()));
    }
    if (!dryRun && !force) {
      refuseWhenEveryIdIsGone(result);
    }
    OrphanSweep.HandOver handOver = null;
    if (!dryRun && result.deletedCount() > 0) {
      TopicProvisioner.ensure(
          bootstrap,
          config.kafka().properties(),
          List.of(topics.deletedRecords()),
          config.kafka().partitions(),
          config.kafka().replicationFactor());
      try (Producer<byte[], byte[]> producer =
          KafkaClients.producer(
              Map.of(), config.kafka().properties(), bootstrap, "spillway-lfk-sweep")) {
        handOver =
            OrphanSweep.handOver(result, producer, topics.deletedRecords(), Clock.systemUTC());
      }
    }
    report(out, result, handOver, topics);
    if (handOver != null && handOver.failed() > 0) {
      throw new IllegalStateException(
          "Kafka refused "
              + handOver.failed()
              + " of "
              + (handOver.sent() + handOver.failed())
              + " deleted records ("
              + handOver.firstError()
              + "); sweep again to hand them over (the ones it took are cleaned, and cleaning them"
              + " again finds nothing).");
    }
    return ErrorHandler.OK;
  }

  private void report(
      PrintWriter out, OrphanSweep.Result result, OrphanSweep.HandOver handOver, Topics topics) {
    if (json) {
      out.println(JsonOut.of(JsonResult.of(result, topics.deletedRecords(), dryRun, handOver)));
    } else {
      out.print(render(result, dryRun, handOver, topics.deletedRecords()));
    }
    out.flush();
  }

  /**
   * A parent table lacking every id its children refer to more likely is not the table they refer
   * to (tables: maps it to another database holding one of that name) than had all its rows
   * deleted: handing them over would clean every child.
   */
  private void refuseWhenEveryIdIsGone(OrphanSweep.Result result) {
    for (OrphanSweep.Finding f : result.findings()) {
      if (f.deleted() > 0 && f.deleted() == f.referred() - f.unreadable() - f.left()) {
        CheckedKey k = f.key();
        throw new ParameterException(
            spec.commandLine(),
            String.format(
                "%s (database %s) lacks every one of the %,d ids %s.%s refers to: is it the table"
                    + " they refer to (tables: says where it lives)? Nothing was handed over; look"
                    + " with --dry-run, then hand them over with --force",
                k.key().parent().displayName(),
                k.parentDatabase(),
                f.deleted(),
                k.key().child().displayName(),
                k.key().column()));
      }
    }
  }

  /**
   * The definitions of the parents named, all when none is; a name that is no parent is refused.
   */
  private List<LooseForeignKey> selected(List<LooseForeignKey> definitions) {
    if (parents.isEmpty()) {
      return definitions;
    }
    Set<TableName> known = new LinkedHashSet<>();
    definitions.forEach(d -> known.add(d.parent()));
    Set<TableName> wanted = new LinkedHashSet<>();
    for (String p : parents) {
      TableName t = TableArgument.parse(spec, "PARENT", p);
      if (!known.contains(t)) {
        throw new ParameterException(
            spec.commandLine(),
            "PARENT "
                + p
                + " is not the parent of any loose foreign key"
                + (known.isEmpty()
                    ? "; none is defined"
                    : " (parents: "
                        + known.stream()
                            .map(TableName::displayName)
                            .collect(Collectors.joining(", "))
                        + ")"));
      }
      wanted.add(t);
    }
    return definitions.stream().filter(d -> wanted.contains(d.parent())).toList();
  }

  static String render(
      OrphanSweep.Result result, boolean dryRun, OrphanSweep.HandOver handOver, String topic) {
    StringBuilder s = new StringBuilder();
    if (result.findings().isEmpty()) {
      return "No loose foreign keys to sweep.\n";
    }
    long swept = result.findings().stream().filter(OrphanSweep.Finding::swept).count();
    int all = result.findings().size();
    s.append("Swept ")
        .append(
            swept == all
                ? Count.of(all, "loose foreign key", "loose foreign keys")
                : swept + " of " + Count.of(all, "loose foreign key", "loose foreign keys"))
        .append(":\n");
    int width =
        result.findings().stream().mapToInt(f -> f.key().key().describe().length()).max().orElse(0);
    for (OrphanSweep.Finding f : result.findings()) {
      s.append(String.format("  %-" + width + "s  ", f.key().key().describe()));
      if (!f.swept()) {
        s.append("not swept: ").append(f.key().unsweepable().orElse("")).append('\n');
        continue;
      }
      s.append(String.format("%,d parent ids referred to, %,d deleted", f.referred(), f.deleted()));
      if (f.unreadable() > 0) {
        s.append(String.format(", %,d no value of the parent's key type", f.unreadable()));
      }
      if (f.left() > 0) {
        s.append(
            String.format(
                ", %,d referring to none but ending in spaces the key drops (cleanup leaves"
                    + " those)",
                f.left()));
      }
      s.append('\n');
    }
    if (swept == 0) {
      return s.append("None could be swept: no child was read.\n").toString();
    }
    if (result.deleted().isEmpty()) {
      return s.append(
              swept == all
                  ? "No child refers to a deleted parent row.\n"
                  : "No child of the keys swept refers to a deleted parent row.\n")
          .toString();
    }
    if (dryRun) {
      s.append("Would hand to the cleanup");
    } else if (handOver != null && handOver.failed() > 0) {
      s.append(
          String.format(
              "Found deleted; Kafka took %,d of their %,d records for the cleanup",
              handOver.sent(), handOver.sent() + handOver.failed()));
    } else {
      s.append("Handed to the cleanup");
    }
    s.append(" (").append(topic).append("):\n");
    result
        .deleted()
        .forEach(
            (p, ids) -> {
              s.append(
                  String.format(
                      "  %-40s %,d deleted rows: ",
                      p.table().displayName() + " (" + p.database() + ")", ids.size()));
              s.append(String.join(", ", ids.subList(0, Math.min(SHOWN_IDS, ids.size()))));
              if (ids.size() > SHOWN_IDS) {
                s.append(String.format(", and %,d more", ids.size() - SHOWN_IDS));
              }
              s.append('\n');
            });
    if (dryRun) {
      s.append("Dry run: nothing handed over.\n");
    } else if (handOver != null && handOver.failed() == 0) {
      s.append(
          "Running Spillway cleans their children like captured deletes; 'lfk status' shows them"
              + " until it has.\n");
    }
    return s.toString();
  }

  /** {@code --json}: per loose foreign key what was read, per parent the ids found deleted. */
  record JsonResult(
      List<JsonFinding> keys,
      List<JsonParent> deleted,
      String topic,
      boolean dryRun,
      Long handedOver) {
    static JsonResult of(
        OrphanSweep.Result r, String topic, boolean dryRun, OrphanSweep.HandOver handOver) {
      return new JsonResult(
          r.findings().stream().map(JsonFinding::of).toList(),
          r.deleted().entrySet().stream()
              .map(
                  e ->
                      new JsonParent(
                          e.getKey().database(), e.getKey().table().displayName(), e.getValue()))
              .toList(),
          topic,
          dryRun,
          handOver == null ? null : handOver.sent());
    }
  }

  /**
   * One loose foreign key: swept or not (and then why not), the ids read, and how many are gone.
   */
  record JsonFinding(
      String child,
      String column,
      String parent,
      String onDelete,
      boolean swept,
      String notSwept,
      long referred,
      long deleted,
      long notOfKeyType,
      long leftByCleanup) {
    static JsonFinding of(OrphanSweep.Finding f) {
      LooseForeignKey k = f.key().key();
      return new JsonFinding(
          k.child().displayName(),
          k.column(),
          k.parent().displayName(),
          k.onDelete().yaml(),
          f.swept(),
          f.swept() ? null : f.key().unsweepable().orElse(null),
          f.referred(),
          f.deleted(),
          f.unreadable(),
          f.left());
    }
  }

  /** {@code --recheck-after}: a duration such as {@code 2s} or {@code 500ms}. */
  static final class Durations implements ITypeConverter<Duration> {
    @Override
    public Duration convert(String value) {
      Duration d =
          DurationText.parse(value)
              .filter(parsed -> !parsed.isNegative())
              .orElseThrow(
                  () ->
                      new TypeConversionException(
                          "'" + value + "' is not a duration such as 2s, 500ms or 1m"));
      if (d.compareTo(DurationText.MAX) > 0) {
        throw new TypeConversionException(
            "'" + value + "' is longer than " + DurationText.format(DurationText.MAX));
      }
      return d;
    }
  }

  record JsonParent(String database, String table, List<String> ids) {}
}
