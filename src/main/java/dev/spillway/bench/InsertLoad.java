package dev.spillway.bench;

import static java.nio.charset.StandardCharsets.UTF_8;

import dev.spillway.jdbc.DatabaseEndpoint;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The application of a benchmark: {@link InsertClients} run as a Java process of their own, as
 * pgbench runs apart from what it measures. Sharing a process would let its garbage collections and
 * safepoints stop the clients too, and charge them to the database. Not thread-safe.
 */
final class InsertLoad implements AutoCloseable {
  /**
   * What one run saw.
   *
   * @param cpuSeconds CPU the clients' process used while they ran
   */
  record Result(long inserts, double seconds, double cpuSeconds, Latency latency) {
    double tps() {
      return inserts / seconds;
    }
  }

  /** The inserts' latency in microseconds: the mean and nearest-rank percentiles. */
  record Latency(double mean, long p50, long p99) {
    static Latency of(Samples s) {
      return new Latency(s.mean(), s.percentile(50), s.percentile(99));
    }
  }

  private static final String HEAP = "-Xmx256m";

  private final DatabaseEndpoint database;
  private final String insert;
  private final int clients;
  private final double rate;
  private final List<String> launcher;
  private Process process;
  private BufferedReader lines;

  /**
   * @param insert a statement with one bigint parameter, such as {@code INSERT INTO t (contact_id,
   *     activity) VALUES (?, 'call')}
   * @param rate inserts per second of all clients together, spread evenly; 0 for as fast as the
   *     database takes them
   * @param launcher what goes before the clients' java command, such as {@code taskset -c 0}, or
   *     nothing
   */
  InsertLoad(
      DatabaseEndpoint database, String insert, int clients, double rate, List<String> launcher) {
    this.database = database;
    this.insert = insert;
    this.clients = clients;
    this.rate = rate;
    this.launcher = List.copyOf(launcher);
  }

  /**
   * Starts the clients' process and returns once its clients are inserting: after 2 s of inserts
   * into a temporary table (no WAL, nothing captured) that leave its code compiled.
   */
  void start() throws IOException {
    List<String> command = new ArrayList<>(launcher);
    command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    command.add(HEAP);
    command.add("-cp");
    command.add(System.getProperty("java.class.path"));
    command.add(InsertClients.class.getName());
    command.add(database.url());
    command.add(database.username());
    command.add(String.valueOf(clients));
    command.add(String.valueOf(rate));
    command.add(insert);
    ProcessBuilder builder =
        new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT);
    if (database.password() != null) {
      builder.environment().put(InsertClients.PASSWORD_ENV, database.password());
    }
    process = builder.start();
    lines = new BufferedReader(new InputStreamReader(process.getInputStream(), UTF_8));
    expect("started");
  }

  /** Stops the clients and returns what they saw. */
  Result stop() throws IOException, InterruptedException {
    try (Writer stdin = new OutputStreamWriter(process.getOutputStream(), UTF_8)) {
      stdin.write("stop\n");
    } catch (IOException gone) {
      // the process has ended already; what it said last tells why
    }
    String[] done = expect("done").split(" ");
    process.waitFor();
    return new Result(
        Long.parseLong(done[1]),
        Double.parseDouble(done[2]),
        Double.parseDouble(done[3]),
        new Latency(Double.parseDouble(done[4]), Long.parseLong(done[5]), Long.parseLong(done[6])));
  }

  /** Ends the clients' process if it still runs, as after a phase that failed before stop(). */
  @Override
  public void close() {
    if (process != null && process.isAlive()) {
      process.destroy();
    }
  }

  /** The clients' next line starting with {@code word}; other output is passed on to stderr. */
  private String expect(String word) throws IOException {
    String line = lines.readLine();
    while (line != null && !line.startsWith(word) && !line.startsWith("failed ")) {
      System.err.println(line);
      line = lines.readLine();
    }
    if (line == null || !line.startsWith(word)) {
      process.destroy();
      throw new IllegalStateException(
          line == null
              ? "The insert load ended before it said " + word
              : line.substring("failed ".length()));
    }
    return line;
  }
}
