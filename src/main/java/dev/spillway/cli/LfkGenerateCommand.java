package dev.spillway.cli;

import dev.spillway.config.ConfigException;
import dev.spillway.config.SpillwayConfig;
import dev.spillway.jdbc.DatabaseEndpoint;
import dev.spillway.lfk.DefinitionsFile;
import dev.spillway.lfk.ForeignKey;
import dev.spillway.lfk.LfkConfig;
import dev.spillway.lfk.LfkGenerator;
import dev.spillway.support.Directories;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileSystemException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFileAttributeView;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.Callable;
import java.util.regex.Pattern;
import java.util.regex.PatternSyntaxException;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ParentCommand;
import picocli.CommandLine.Spec;

/**
 * {@code spillway lfk generate}: shows the real foreign keys of the configured databases in
 * GitLab's table, and turns those the filters match into loose foreign keys: entries appended to
 * the definitions file, and per database a migration dropping the keys with a down migration
 * restoring them.
 */
@Command(
    name = "generate",
    description = {
      "Show foreign keys; turn those matching every FILTER into loose foreign keys.",
      "FILTERs are regular expressions matched against FROM, TO or COLUMN (^ and $ anchor)."
    })
final class LfkGenerateCommand implements Callable<Integer> {
  private static final DateTimeFormatter STAMP = DateTimeFormatter.ofPattern("yyyyMMddHHmmss");

  @ParentCommand LfkCommand lfk;
  @Spec CommandSpec spec;

  @Option(
      names = "--cross-database",
      description = "Only foreign keys whose tables 'tables:' maps to different databases.")
  boolean crossDatabase;

  @Option(
      names = {"-n", "--dry-run"},
      description = "Print what would be written; write nothing.")
  boolean dryRun;

  @Option(
      names = "--migrations-dir",
      paramLabel = "DIR",
      description = "Where migrations go (default: db/migrate next to the config file).")
  Path migrationsDir;

  @Parameters(paramLabel = "FILTER", arity = "0..*")
  List<String> filters = new ArrayList<>();

  @Override
  public Integer call() throws Exception {
    for (String f : filters) {
      try {
        Pattern.compile(f);
      } catch (PatternSyntaxException e) {
        throw new ParameterException(
            spec.commandLine(),
            "FILTER '" + f + "' is not a regular expression: " + e.getDescription());
      }
    }
    SpillwayConfig config = Launch.config(lfk.root);
    LfkConfig lfkConfig = LfkConfig.from(config, true);
    Path dir = migrationsDir(config);
    Optional<Path> file = Directories.fileInTheWay(dir);
    if (file.isPresent()) {
      throw new ParameterException(
          spec.commandLine(),
          (migrationsDir != null ? "--migrations-dir " : "The migrations directory ")
              + Directories.problem(dir, file.get()));
    }
    if (!filters.isEmpty() && lfkConfig.file().isEmpty() && !dryRun) {
      // Before any catalog is read (an embedded database started for it): nothing could be added.
      throw new ParameterException(
          spec.commandLine(),
          "loose-foreign-keys.file is not set in the configuration: name the definitions file"
              + " the generator should add to, or look first with --dry-run");
    }
    PrintWriter out = spec.commandLine().getOut();
    List<ForeignKey> keys = new ArrayList<>();
    try (Catalogs catalogs = Catalogs.open(config)) {
      for (DatabaseEndpoint e : catalogs.databases().endpoints()) {
        keys.addAll(ForeignKey.read(e.name(), catalogs.databases().dataSource(e.name())));
      }
    }
    List<LfkGenerator.Row> rows =
        new LfkGenerator(keys, lfkConfig.definitions()).rows(crossDatabase, config::databaseOf);
    out.printf(
        "Showing %sforeign keys (%d):%n", crossDatabase ? "cross-database " : "", rows.size());
    out.print(LfkGenerator.table(rows));
    out.flush();
    if (filters.isEmpty()) {
      out.println();
      out.println(
          "To turn foreign keys into loose foreign keys, give filters matching FROM, TO or COLUMN:");
      out.println("  bin/spillway lfk generate [--dry-run] ci_builds project_id");
      out.flush();
      return ErrorHandler.OK;
    }
    List<LfkGenerator.Row> matching = LfkGenerator.matching(rows, filters);
    List<LfkGenerator.Row> convertible = new ArrayList<>();
    for (LfkGenerator.Row r : matching) {
      Optional<String> skip =
          LfkGenerator.skipReason(r).or(() -> LfkGenerator.misplaced(r, rows, config::databaseOf));
      if (skip.isPresent()) {
        skipping(out, r, skip.get());
      } else {
        convertible.add(r);
      }
    }
    List<ForeignKey> converted = new ArrayList<>();
    for (LfkGenerator.Row r : convertible) {
      Optional<String> conflict = LfkGenerator.conflict(r, matching);
      if (conflict.isPresent()) {
        skipping(out, r, conflict.get());
      } else {
        converted.add(r.key());
      }
    }
    if (converted.isEmpty()) {
      out.println("Nothing to convert.");
      out.flush();
      return ErrorHandler.OK;
    }
    Path definitions =
        lfkConfig
            .file()
            .orElse(baseDir(config).resolve("config").resolve("loose_foreign_keys.yml"));
    if (lfkConfig.file().isEmpty() && Files.exists(definitions)) {
      // Read as run would once it is set; the configured one was read with the configuration.
      DefinitionsFile.read(definitions);
    }
    write(out, config, definitions, converted);
    out.flush();
    return ErrorHandler.OK;
  }

  private static void skipping(PrintWriter out, LfkGenerator.Row r, String reason) {
    out.printf(
        "Skipping %d (%s.%s): %s%n",
        r.id(), r.key().from().displayName(), r.key().column(), reason);
  }

  private void write(
      PrintWriter out, SpillwayConfig config, Path definitions, List<ForeignKey> converted)
      throws IOException {
    String before =
        Files.exists(definitions) ? Files.readString(definitions, StandardCharsets.UTF_8) : "";
    String after;
    try {
      after = LfkGenerator.addDefinitions(before, converted);
    } catch (IllegalArgumentException e) {
      // The file as its owner wrote it, a mistake of input like any in the configuration.
      throw new ConfigException(
          definitions.toString(), null, null, e.getMessage() + "; nothing was written");
    }
    Map<String, List<ForeignKey>> byDatabase = new LinkedHashMap<>();
    converted.forEach(k -> byDatabase.computeIfAbsent(k.database(), d -> new ArrayList<>()).add(k));
    Path dir = migrationsDir(config);
    // Two runs within a second must not give the second's migration the first one's name: that
    // would overwrite the migration dropping the first run's keys.
    LocalDateTime time = LocalDateTime.now(ZoneOffset.UTC).withNano(0);
    Map<Path, String> migrations = migrations(dir, time.format(STAMP), byDatabase);
    while (migrations.keySet().stream().anyMatch(Files::exists)) {
      time = time.plusSeconds(1);
      migrations = migrations(dir, time.format(STAMP), byDatabase);
    }
    if (dryRun) {
      out.printf(
          "%nDry run: nothing written. Would add to %s%s:%n",
          definitions,
          Files.exists(definitions) ? "" : " (a new file; set loose-foreign-keys.file to it)");
      out.print(LfkGenerator.definitions(converted));
      migrations.forEach((path, text) -> out.printf("Would write %s:%n%s", path, text));
      return;
    }
    writeFiles(definitions, after, migrations);
    out.printf(
        "%nAdded %s to %s%n",
        Count.of(LfkGenerator.oneEach(converted).size(), "loose foreign key", "loose foreign keys"),
        definitions);
    migrations.keySet().forEach(p -> out.printf("Wrote %s%n", p));
    out.println(
        "Deploy the definitions (restart 'run') before applying the up migration, so no delete"
            + " goes uncleaned.");
  }

  /**
   * Writes the migrations, each a new file, then the definitions. A failure leaves the definitions
   * as they were and takes back the migrations written, so that running again converts the same
   * keys and writes the migration dropping them; the definitions first would leave them converted
   * with no migration.
   *
   * @throws UncheckedIOException saying in one sentence what failed and that nothing was written
   */
  static void writeFiles(Path definitions, String text, Map<Path, String> migrations) {
    List<Path> written = new ArrayList<>();
    try {
      for (Map.Entry<Path, String> m : migrations.entrySet()) {
        Files.createDirectories(m.getKey().toAbsolutePath().getParent());
        Files.createFile(m.getKey()); // never over another run's migration
        written.add(m.getKey());
        Files.writeString(m.getKey(), m.getValue(), StandardCharsets.UTF_8);
      }
      // Written beside it and moved over it: a write cut short (a full disk) leaves it as it was.
      // A link to it stays a link: the file it points at is the one replaced.
      Path target = Files.exists(definitions) ? definitions.toRealPath() : definitions;
      Path dir = Files.createDirectories(target.toAbsolutePath().getParent());
      // Made as any new file is (the umask's mode), then given the mode of the file it replaces:
      // a file readable by the service's user stays readable.
      Path next = dir.resolve("." + target.getFileName() + "." + UUID.randomUUID() + ".tmp");
      try {
        Files.writeString(next, text, StandardCharsets.UTF_8, StandardOpenOption.CREATE_NEW);
        if (Files.exists(target)
            && Files.getFileStore(target).supportsFileAttributeView(PosixFileAttributeView.class)) {
          Files.setPosixFilePermissions(next, Files.getPosixFilePermissions(target));
        }
        Files.move(
            next, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
      } finally {
        Files.deleteIfExists(next);
      }
    } catch (IOException e) {
      for (Path p : written) {
        try {
          Files.deleteIfExists(p);
        } catch (IOException left) {
          e.addSuppressed(left);
        }
      }
      throw new UncheckedIOException(
          (e instanceof FileSystemException f ? ErrorHandler.fileProblem(f) : e.getMessage())
              + "; no migration was written and "
              + definitions
              + " is unchanged",
          e);
    }
  }

  /** Per database, an up and a down migration named after the time stamp. */
  private static Map<Path, String> migrations(
      Path dir, String stamp, Map<String, List<ForeignKey>> byDatabase) {
    Map<Path, String> files = new LinkedHashMap<>();
    byDatabase.forEach(
        (db, keys) -> {
          String name = stamp + "_" + db + "_replace_foreign_keys_with_loose_foreign_keys";
          files.put(dir.resolve(name + ".up.sql"), LfkGenerator.up(keys));
          files.put(dir.resolve(name + ".down.sql"), LfkGenerator.down(keys));
        });
    return files;
  }

  private Path migrationsDir(SpillwayConfig config) {
    return migrationsDir != null ? migrationsDir : baseDir(config).resolve("db").resolve("migrate");
  }

  private static Path baseDir(SpillwayConfig config) {
    return config.source() == null
        ? Path.of("").toAbsolutePath()
        : config.source().toAbsolutePath().getParent();
  }
}
