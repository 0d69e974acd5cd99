package dev.spillway.cli;

import dev.spillway.bench.BufferBench;
import dev.spillway.bench.CaptureBench;
import dev.spillway.bench.LfkBench;
import dev.spillway.config.SpillwayConfig;
import dev.spillway.lfk.LfkSettings;
import dev.spillway.runtime.EmbeddedPostgresServer;
import dev.spillway.runtime.SpillwayRuntime;
import dev.spillway.runtime.WorkingDirectory;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.Comparator;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.stream.Stream;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParentCommand;
import picocli.CommandLine.Spec;

/** {@code spillway bench <pipeline>}: benchmarks on embedded parts, printed as figures. */
@Command(
    name = "bench",
    description = "Measure a pipeline on embedded PostgreSQL and Kafka.",
    subcommands = {
      BenchCommand.Capture.class,
      BenchCommand.SinkWork.class,
      BenchCommand.Lfk.class,
      BenchCommand.Buffers.class
    })
final class BenchCommand implements Runnable {
  @ParentCommand SpillwayCommand root;
  @Spec CommandSpec spec;

  @Override
  public void run() {
    throw CommandGroup.missingCommand(spec);
  }

  /**
   * A fresh embedded runtime in {@code <working-dir>/bench/<name>}, so figures never depend on what
   * an earlier run left behind.
   */
  static SpillwayRuntime freshRuntime(SpillwayCommand root, String name, PrintWriter out)
      throws IOException, InterruptedException {
    SpillwayConfig base = Launch.config(root).embedded();
    Path dir = base.workingDir().resolve("bench").resolve(name);
    WorkingDirectory held;
    try {
      held = WorkingDirectory.acquire(dir);
    } catch (IllegalStateException inUse) {
      throw new IllegalStateException("Another benchmark is running in " + dir + ".");
    }
    // Under the directory's lock, so a benchmark still starting there keeps its data; a server a
    // killed run left on that data is stopped before its files go.
    try (held) {
      Path data = dir.resolve("postgres").resolve("data");
      EmbeddedPostgresServer.stopLeftRunning(data);
      deleteRecursively(dir.resolve("kafka"));
      deleteRecursively(data);
    }
    out.printf("Starting embedded PostgreSQL and Kafka in %s ...%n", dir);
    out.flush();
    return SpillwayRuntime.start(
        base.withWorkingDir(dir).withHttpPort(0), Set.of(), Clock.systemUTC());
  }

  private static void deleteRecursively(Path root) throws IOException {
    if (!Files.exists(root)) {
      return;
    }
    try (Stream<Path> paths = Files.walk(root)) {
      for (Path p : paths.sorted(Comparator.reverseOrder()).toList()) {
        Files.delete(p);
      }
    }
  }

  @Command(
      name = "capture",
      description =
          "One DELETE of many rows until all are in Kafka; then a steady insert rate and its"
              + " commit -> Kafka latency.")
  static final class Capture implements Callable<Integer> {
    @ParentCommand BenchCommand bench;
    @Spec CommandSpec spec;

    @Option(
        names = "--rows",
        paramLabel = "N",
        defaultValue = "100000",
        description = "Rows deleted at once (default ${DEFAULT-VALUE}).")
    int rows;

    @Option(
        names = "--rate",
        paramLabel = "N",
        defaultValue = "5000",
        description = "Changes per second in the steady phase (default ${DEFAULT-VALUE}).")
    int rate;

    @Option(
        names = "--seconds",
        paramLabel = "SECONDS",
        defaultValue = "30",
        description = "Length of the steady phase (default ${DEFAULT-VALUE}).")
    int seconds;

    @Override
    public Integer call() throws Exception {
      new Options(spec)
          .positive("--rows", rows)
          .positive("--rate", rate)
          .positive("--seconds", seconds);
      PrintWriter out = spec.commandLine().getOut();
      try (SpillwayRuntime runtime = freshRuntime(bench.root, "capture", out)) {
        out.printf(
            "Capture benchmark: embedded PostgreSQL and Kafka, %d cores%n",
            Runtime.getRuntime().availableProcessors());
        new CaptureBench(runtime, out)
            .run(new CaptureBench.Options(rows, rate, Duration.ofSeconds(seconds)));
      }
      return ErrorHandler.OK;
    }
  }

  @Command(
      name = "sink",
      description =
          "A sink deleting rows beside a foreground probe; a STOP signal timed until no sub-batch"
              + " starts; the cost of health sampling.")
  static final class SinkWork implements Callable<Integer> {
    @ParentCommand BenchCommand bench;
    @Spec CommandSpec spec;

    @Option(
        names = "--rows",
        paramLabel = "N",
        defaultValue = "300000",
        description = "Rows the sink deletes (default ${DEFAULT-VALUE}).")
    int rows;

    @Option(
        names = "--batch-size",
        paramLabel = "N",
        defaultValue = "5000",
        description = "Rows per batch (default ${DEFAULT-VALUE}).")
    int batchSize;

    @Option(
        names = "--sub-batch",
        paramLabel = "N",
        defaultValue = "500",
        description = "Rows per sub-batch (default ${DEFAULT-VALUE}).")
    int subBatch;

    @Option(
        names = "--clients",
        paramLabel = "N",
        defaultValue = "4",
        description = "Foreground probe clients (default ${DEFAULT-VALUE}).")
    int clients;

    @Override
    public Integer call() throws Exception {
      new Options(spec)
          .positive("--rows", rows)
          .positive("--batch-size", batchSize)
          .positive("--sub-batch", subBatch)
          .clients(clients);
      PrintWriter out = spec.commandLine().getOut();
      try (SpillwayRuntime runtime = freshRuntime(bench.root, "sink", out)) {
        out.printf(
            "Sink benchmark: embedded PostgreSQL and Kafka, %d cores%n",
            Runtime.getRuntime().availableProcessors());
        new dev.spillway.bench.SinkBench(runtime, out)
            .run(new dev.spillway.bench.SinkBench.Options(rows, batchSize, subBatch, clients));
      }
      return ErrorHandler.OK;
    }
  }

  @Command(
      name = "lfk",
      description =
          "Children of deleted parents cleaned three ways on the same fresh data: ON DELETE"
              + " CASCADE, a PL/pgSQL procedure in LIMIT 1000 SKIP LOCKED batches, and Spillway's"
              + " loose foreign keys; then Spillway's cleanup beside a foreground probe.")
  static final class Lfk implements Callable<Integer> {
    @ParentCommand BenchCommand bench;
    @Spec CommandSpec spec;

    @Option(
        names = "--parents",
        paramLabel = "N",
        defaultValue = "10000",
        description = "Parent rows deleted at once (default ${DEFAULT-VALUE}).")
    int parents;

    @Option(
        names = "--children",
        paramLabel = "N",
        defaultValue = "1000000",
        description = "Child rows, spread evenly over the parents (default ${DEFAULT-VALUE}).")
    int children;

    @Option(
        names = "--probe",
        negatable = true,
        defaultValue = "true",
        fallbackValue = "true",
        description =
            "Run Spillway's cleanup again beside a foreground probe (default ${DEFAULT-VALUE}).")
    boolean probe;

    @Option(
        names = "--clients",
        paramLabel = "N",
        defaultValue = "4",
        description = "Foreground probe clients (default ${DEFAULT-VALUE}).")
    int clients;

    @Option(
        names = "--poll-ms",
        paramLabel = "MS",
        defaultValue = "20",
        description = "How often to ask whether a child is left, in ms (default ${DEFAULT-VALUE}).")
    int pollMillis;

    @Option(
        names = "--batch-size",
        paramLabel = "N",
        defaultValue = "" + LfkSettings.DEFAULT_BATCH_SIZE,
        description = "Deleted parents per cleanup batch (default ${DEFAULT-VALUE}).")
    int batchSize;

    @Option(
        names = "--max-wait-ms",
        paramLabel = "MS",
        defaultValue = "1000",
        description =
            "Longest a deleted parent waits for its batch, in ms (default ${DEFAULT-VALUE}).")
    int maxWaitMillis;

    @Option(
        names = "--delete-limit",
        paramLabel = "N",
        defaultValue = "" + LfkSettings.DEFAULT_DELETE_LIMIT,
        description = "Children per delete statement (default ${DEFAULT-VALUE}).")
    int deleteLimit;

    @Option(
        names = "--max-deletes-per-run",
        paramLabel = "N",
        defaultValue = "" + LfkSettings.DEFAULT_MAX_DELETES_PER_RUN,
        description = "Deletes after which a cleanup run ends (default ${DEFAULT-VALUE}).")
    long maxDeletesPerRun;

    @Option(
        names = "--sink-poll-ms",
        paramLabel = "MS",
        description =
            "The cleanup sink's poll timeout in ms, for experiments (default: the configured"
                + " sink's).")
    Integer sinkPollMillis;

    @Override
    public Integer call() throws Exception {
      new Options(spec)
          .positive("--parents", parents)
          .positive("--children", children)
          .clients(clients)
          .positive("--poll-ms", pollMillis)
          .positive("--batch-size", batchSize)
          .positive("--max-wait-ms", maxWaitMillis)
          .positive("--delete-limit", deleteLimit)
          .positive("--max-deletes-per-run", maxDeletesPerRun)
          .positive("--sink-poll-ms", sinkPollMillis == null ? 1 : sinkPollMillis);
      PrintWriter out = spec.commandLine().getOut();
      try (SpillwayRuntime runtime = freshRuntime(bench.root, "lfk", out)) {
        out.printf(
            "Loose-foreign-key benchmark: embedded PostgreSQL and Kafka, %d cores%n",
            Runtime.getRuntime().availableProcessors());
        new LfkBench(runtime, out)
            .run(
                new LfkBench.Options(
                    parents,
                    children,
                    probe,
                    clients,
                    Duration.ofMillis(pollMillis),
                    batchSize,
                    Duration.ofMillis(maxWaitMillis),
                    deleteLimit,
                    maxDeletesPerRun,
                    Optional.ofNullable(sinkPollMillis).map(Duration::ofMillis)));
      }
      return ErrorHandler.OK;
    }
  }

  @Command(
      name = "buffers",
      description =
          "Single-row inserts into a plain table, into one drained by a SKIP LOCKED poller, and"
              + " into a buffer table Spillway drains; throughput, backlog and insert -> handled.")
  static final class Buffers implements Callable<Integer> {
    @ParentCommand BenchCommand bench;
    @Spec CommandSpec spec;

    @Option(
        names = "--duration",
        paramLabel = "SECONDS",
        defaultValue = "60",
        description = "Seconds of inserts per phase (default ${DEFAULT-VALUE}).")
    int duration;

    @Option(
        names = "--clients",
        paramLabel = "N",
        defaultValue = "4",
        description = "Inserting clients (default ${DEFAULT-VALUE}).")
    int clients;

    @Option(
        names = "--rate",
        paramLabel = "N",
        defaultValue = "0",
        description =
            "Inserts per second of all clients together, each on a fixed schedule as pgbench"
                + " --rate; 0 for as fast as they can (default ${DEFAULT-VALUE}).")
    double rate;

    @Option(
        names = "--batch-size",
        paramLabel = "N",
        defaultValue = "1000",
        description = "Events per batch (default ${DEFAULT-VALUE}).")
    int batchSize;

    @Option(
        names = "--max-wait-ms",
        paramLabel = "MS",
        defaultValue = "500",
        description = "Longest a batch waits for more events (default ${DEFAULT-VALUE}).")
    int maxWaitMs;

    @Option(
        names = "--max-in-flight",
        paramLabel = "N",
        defaultValue = "4",
        description =
            "Batches handled at once; the poller runs as many claim jobs (default"
                + " ${DEFAULT-VALUE}).")
    int maxInFlight;

    @Option(
        names = "--waits",
        description =
            "Also sample pg_stat_activity every "
                + BufferBench.WAIT_SAMPLE_MILLIS
                + " ms for what the inserts wait on (WAL sync, WAL"
                + " write lock, CPU...), as shares per design; the sampling costs the database a"
                + " little CPU.")
    boolean waits;

    @Option(
        names = "--separate-cores",
        description =
            "Run the database and the clients on half of the CPUs and Spillway with its Kafka on"
                + " the other half (Linux taskset), in every phase: insert cost as if Spillway ran"
                + " on a machine of its own.")
    boolean separateCores;

    @Override
    public Integer call() throws Exception {
      new Options(spec)
          .positive("--duration", duration)
          .clients(clients)
          .positive("--batch-size", batchSize)
          .positive("--max-wait-ms", maxWaitMs)
          .positive("--max-in-flight", maxInFlight);
      if (separateCores) {
        try {
          BufferBench.checkSeparateCores();
        } catch (IllegalArgumentException e) {
          throw new picocli.CommandLine.ParameterException(spec.commandLine(), e.getMessage());
        }
      }
      if (!(rate >= 0) || Double.isInfinite(rate)) {
        throw new picocli.CommandLine.ParameterException(
            spec.commandLine(), "--rate must be 0 (as fast as they can) or a positive number");
      }
      PrintWriter out = spec.commandLine().getOut();
      try (SpillwayRuntime runtime = freshRuntime(bench.root, "buffers", out)) {
        out.printf(
            "Buffers benchmark: embedded PostgreSQL and Kafka, %d cores%n",
            Runtime.getRuntime().availableProcessors());
        new BufferBench(runtime, out)
            .run(
                new BufferBench.Options(
                    Duration.ofSeconds(duration),
                    clients,
                    rate,
                    batchSize,
                    Duration.ofMillis(maxWaitMs),
                    maxInFlight,
                    waits,
                    separateCores));
      }
      return ErrorHandler.OK;
    }
  }

  /** Checks of the numbers a benchmark is given, each naming the option it refuses. */
  private static final class Options {
    /**
     * Clients at most: the embedded PostgreSQL takes 200 connections, Spillway's pools and the
     * benchmark's other sessions among them.
     */
    static final int MAX_CLIENTS = 100;

    private final CommandSpec spec;

    Options(CommandSpec spec) {
      this.spec = spec;
    }

    Options positive(String option, long value) {
      if (value < 1) {
        throw new picocli.CommandLine.ParameterException(
            spec.commandLine(), option + " must be positive, not " + value);
      }
      return this;
    }

    Options clients(int clients) {
      positive("--clients", clients);
      if (clients > MAX_CLIENTS) {
        throw new picocli.CommandLine.ParameterException(
            spec.commandLine(),
            "--clients must be at most "
                + MAX_CLIENTS
                + ", not "
                + clients
                + ": the embedded PostgreSQL takes 200 connections, Spillway's own among them");
      }
      return this;
    }
  }
}
