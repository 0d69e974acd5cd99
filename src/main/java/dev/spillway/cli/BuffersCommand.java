package dev.spillway.cli;

import dev.spillway.buffers.BufferPipeline;
import dev.spillway.buffers.BufferSettings;
import dev.spillway.capture.Capture;
import dev.spillway.capture.CaptureSettings;
import dev.spillway.capture.CaptureSetupException;
import dev.spillway.config.SpillwayConfig;
import dev.spillway.ops.RowCount;
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import javax.sql.DataSource;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ParentCommand;
import picocli.CommandLine.Spec;

/** {@code spillway buffers …}: buffer tables. */
@Command(
    name = "buffers",
    description = "Buffer tables: read their waiting rows again.",
    subcommands = {BuffersCommand.Reread.class})
final class BuffersCommand implements Runnable {
  @ParentCommand SpillwayCommand root;
  @Spec CommandSpec spec;

  @Override
  public void run() {
    throw CommandGroup.missingCommand(spec);
  }

  @Command(
      name = "reread",
      description =
          "Ask capture to read the rows waiting in these buffers' tables again and hand them over:"
              + " for rows whose captured inserts Kafka no longer holds (its retention passed"
              + " while Spillway was stopped, say). Each row is handled once.")
  static final class Reread implements Callable<Integer> {
    @ParentCommand BuffersCommand buffers;
    @Spec CommandSpec spec;

    @Parameters(paramLabel = "NAME", arity = "1..*", description = "Buffers, by name.")
    List<String> names;

    @Override
    public Integer call() throws Exception {
      SpillwayConfig config = Launch.config(buffers.root);
      List<BufferSettings> chosen = chosen(BufferPipeline.fromConfig(config).buffers());
      PrintWriter out = spec.commandLine().getOut();
      int code = ErrorHandler.OK;
      try (Catalogs catalogs = Catalogs.open(config)) {
        // Before anything is asked, so that a refusal leaves every buffer as it was.
        BufferPipeline.checkTables(chosen, catalogs.databases());
        for (BufferSettings b : chosen) {
          if (!Capture.readableAgain(b.table())) {
            throw new CaptureSetupException(
                "Buffer "
                    + b.name()
                    + ": Debezium cannot be asked to read "
                    + b.table()
                    + ", whose name has a dot, a space or a quote; nothing was asked: rename the"
                    + " table, or move its rows out and insert them again");
          }
        }
        for (String database : chosen.stream().map(BufferSettings::database).distinct().toList()) {
          Capture.requirePrimary(catalogs.databases().dataSource(database), database);
        }
        for (BufferSettings b : chosen) {
          DataSource ds = catalogs.databases().dataSource(b.database());
          String slot = CaptureSettings.slotName(config.kafka().topicPrefix(), b.database());
          String rows;
          try {
            rows = rows(BufferPipeline.countRows(ds, b));
          } catch (java.sql.SQLException e) {
            rows = "the rows"; // a count that fails leaves the sentence whole
          }
          switch (Capture.readAgain(ds, b.database(), slot, List.of(b.table()))) {
            case ASKED ->
                out.printf(
                    "Buffer %s: capture of database %s reads %s now in %s again; each is"
                        + " handled as it comes, once.%n",
                    b.name(), b.database(), rows, b.table().displayName());
            case AT_FIRST_START ->
                out.printf(
                    "Buffer %s: capture of database %s does not read %s yet; the next start of run"
                        + " reads %s in it.%n",
                    b.name(), b.database(), b.table().displayName(), rows);
            case SLOT_LOST -> {
              out.printf(
                  "Buffer %s: nothing asked: replication slot %s of database %s can no longer"
                      + " stream (bin/spillway status says why).%n",
                  b.name(), slot, b.database());
              code = ErrorHandler.FAILURE;
            }
          }
        }
      }
      out.flush();
      return code;
    }

    private List<BufferSettings> chosen(List<BufferSettings> all) {
      List<BufferSettings> out = new ArrayList<>();
      // A buffer named twice is read once: read twice, its rows would be handed over twice.
      for (String name : new java.util.LinkedHashSet<>(names)) {
        out.add(
            all.stream()
                .filter(s -> s.name().equals(name))
                .findFirst()
                .orElseThrow(() -> notABuffer(spec, name, all)));
      }
      return out;
    }
  }

  /** The rows waiting as the sentences name them: "the 2,000 rows", "about 2,345,678 rows". */
  static String rows(long count) {
    String n = RowCount.text(count);
    return (n.startsWith("about") ? n : "the " + n) + (count == 1 ? " row" : " rows");
  }

  /** The usage error for {@code given}, which names no buffer of the configuration. */
  static ParameterException notABuffer(
      CommandSpec spec, String given, List<BufferSettings> configured) {
    List<String> known = configured.stream().map(BufferSettings::name).toList();
    return new ParameterException(
        spec.commandLine(),
        given
            + " is not a buffer of the configuration"
            + (known.isEmpty()
                ? ", which has none"
                : " (buffers: " + String.join(", ", known) + ")"));
  }
}
