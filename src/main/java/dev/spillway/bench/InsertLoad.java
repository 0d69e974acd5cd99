package dev.spillway.bench;

import static java.nio.charset.StandardCharsets.UTF_8;

import dev.spillway.jdbc.DatabaseEndpoint;
import java.io.BufferedInputStream;
import java.io.BufferedReader;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The application of a benchmark: {@link InsertClients} run as a Java process of their own, as
 * pgbench runs apart from what it measures. Sharing a process would let its garbage collections and
 * safepoints stop the clients too, and charge them to the database. Not thread-safe.
 */
final class InsertLoad {
  /**
   * What one run saw.
   *
   * @param cpuSeconds CPU the clients' process used while they ran
   */
  record Result(long inserts, double seconds, Samples latencyMicros, double cpuSeconds) {
    double tps() {
      return inserts / seconds;
    }
  }

  private static final String HEAP = "-Xmx256m";

  private final DatabaseEndpoint database;
  private final String insert;
  private final int clients;
  private final double rate;
  private Process process;
  private BufferedReader lines;
  private Path samples;

  /**
   * @param insert a statement with one bigint parameter, such as {@code INSERT INTO t (contact_id,
   *     activity) VALUES (?, 'call')}
   * @param rate inserts per second of all clients together, spread evenly; 0 for as fast as the
   *     database takes them
   */
  InsertLoad(DatabaseEndpoint database, String insert, int clients, double rate) {
    this.database = database;
    this.insert = insert;
    this.clients = clients;
    this.rate = rate;
  }

  /**
   * Starts the clients' process and returns once its clients are inserting: after 2 s of inserts
   * into a temporary table (no WAL, nothing captured) that leave its code compiled.
   */
  void start() throws IOException {
    samples = Files.createTempFile("spillway-bench-latency", ".bin");
    List<String> command = new ArrayList<>();
    command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    command.add(HEAP);
    command.add("-cp");
    command.add(System.getProperty("java.class.path"));
    command.add(InsertClients.class.getName());
    command.add(database.url());
    command.add(database.username());
    command.add(String.valueOf(clients));
    command.add(String.valueOf(rate));
    command.add(samples.toString());
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
    try {
      String[] done = expect("done").split(" ");
      process.waitFor();
      long inserts = Long.parseLong(done[1]);
      try (DataInputStream in =
          new DataInputStream(new BufferedInputStream(Files.newInputStream(samples)))) {
        return new Result(
            inserts,
            Double.parseDouble(done[2]),
            Samples.readFrom(in, inserts),
            Double.parseDouble(done[3]));
      }
    } finally {
      Files.deleteIfExists(samples);
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
