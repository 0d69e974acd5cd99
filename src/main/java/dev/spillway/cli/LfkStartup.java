package dev.spillway.cli;

import dev.spillway.capture.CaptureRoute;
import dev.spillway.config.SpillwayConfig;
import dev.spillway.event.TableName;
import dev.spillway.lfk.CheckedKey;
import dev.spillway.lfk.DefinitionCheck;
import dev.spillway.lfk.DefinitionsFile;
import dev.spillway.lfk.LfkConfig;
import dev.spillway.lfk.LfkPipeline;
import dev.spillway.lfk.LfkSettings;
import dev.spillway.lfk.LooseForeignKey;
import dev.spillway.runtime.SpillwayRuntime;
import dev.spillway.support.Slips;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.sql.SQLException;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** How the commands start the loose-foreign-key pipeline: definitions checked, then started. */
final class LfkStartup {
  private static final Logger log = LoggerFactory.getLogger(LfkStartup.class);

  private LfkStartup() {}

  static LfkSettings settings(SpillwayConfig config) {
    return LfkConfig.from(config).settings();
  }

  static List<LooseForeignKey> definitions(Path file) {
    return DefinitionsFile.read(file);
  }

  /**
   * Checks the definitions against the catalogs (warnings printed), then starts the batcher and the
   * cleanup sink.
   *
   * @param databaseOf table → the database holding it
   */
  static LfkPipeline start(
      SpillwayRuntime runtime,
      LfkSettings settings,
      List<LooseForeignKey> definitions,
      Function<String, String> databaseOf,
      PrintWriter out)
      throws InterruptedException, SQLException {
    return LfkPipeline.start(runtime, settings, check(runtime, definitions, databaseOf, out));
  }

  /**
   * What capture reads for the definitions, checked against the catalogs (warnings printed), with
   * the pipeline itself not started.
   */
  static List<CaptureRoute> routes(
      SpillwayRuntime runtime,
      List<LooseForeignKey> definitions,
      Function<String, String> databaseOf,
      PrintWriter out)
      throws SQLException {
    return LfkPipeline.routes(check(runtime, definitions, databaseOf, out), runtime.topics());
  }

  private static List<CheckedKey> check(
      SpillwayRuntime runtime,
      List<LooseForeignKey> definitions,
      Function<String, String> databaseOf,
      PrintWriter out)
      throws SQLException {
    DefinitionCheck.Result checked =
        DefinitionCheck.check(definitions, databaseOf, runtime.databases()::dataSource);
    Set<String> parents = new TreeSet<>();
    Set<String> databases = new TreeSet<>();
    for (CheckedKey k : checked.keys()) {
      parents.add(k.key().parent().displayName());
      databases.add(k.parentDatabase());
      databases.add(k.childDatabase());
    }
    out.printf(
        "Loose foreign keys: %s on %s (%s), checked in %s%n",
        Count.of(checked.keys().size(), "definition", "definitions"),
        Count.of(parents.size(), "parent table", "parent tables"),
        String.join(", ", parents),
        String.join(" and ", databases));
    out.flush();
    checked.warnings().forEach(w -> log.warn("{}", w)); // beside the log's other warnings
    return checked.keys();
  }

  /** Logs {@link #unrouted}'s warnings for {@code run}'s configuration. */
  static void warnUnrouted(
      SpillwayConfig config, List<LooseForeignKey> definitions, List<TableName> bufferTables) {
    unrouted(config.tables().keySet(), definitions, bufferTables).forEach(w -> log.warn("{}", w));
  }

  /**
   * A warning for each {@code tables:} entry that is no table of a loose foreign key (child or
   * parent) nor a buffer's, which places nothing (a slip of a name, say, whose table then lands in
   * main), naming the table meant when one is a letter or two away.
   */
  static List<String> unrouted(
      Set<String> listed, List<LooseForeignKey> definitions, List<TableName> bufferTables) {
    Set<String> named = new TreeSet<>();
    for (LooseForeignKey k : definitions) {
      named.add(k.child().toString());
      named.add(k.parent().toString());
    }
    bufferTables.forEach(t -> named.add(t.toString()));
    List<String> out = new java.util.ArrayList<>();
    for (String table : listed) {
      if (!named.contains(table)) {
        out.add(
            "tables: "
                + table
                + " is no table of a loose foreign key (child or parent) nor a buffer's in the"
                + " configuration"
                + Slips.nearest(table, named).map(t -> " (did you mean " + t + "?)").orElse("")
                + ", so it places no table.");
      }
    }
    return out;
  }
}
