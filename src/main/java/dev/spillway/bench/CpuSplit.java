package dev.spillway.bench;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

/**
 * This Linux machine's CPUs in two halves, set with {@code taskset}: the database server and the
 * inserting clients on the first, this process (Spillway, its embedded Kafka broker) on the second,
 * as if Spillway ran on a machine of its own. A process or thread started by a pinned one keeps its
 * CPUs, so new database backends and new threads stay where they belong.
 */
final class CpuSplit {
  private final String database;
  private final String spillway;

  private CpuSplit(String database, String spillway) {
    this.database = database;
    this.spillway = spillway;
  }

  /**
   * The first {@code cpus / 2} CPUs for the database, the rest for Spillway.
   *
   * @throws IllegalArgumentException with fewer than 2 CPUs
   */
  static CpuSplit halves(int cpus) {
    if (cpus < 2) {
      throw new IllegalArgumentException(
          "Separate cores need at least 2 CPUs; this machine has " + cpus + ".");
    }
    int half = cpus / 2;
    return new CpuSplit(range(0, half - 1), range(half, cpus - 1));
  }

  private static String range(int first, int last) {
    return first == last ? Integer.toString(first) : first + "-" + last;
  }

  /** The database's CPUs, as taskset lists them ({@code 0}, {@code 0-3}). */
  String database() {
    return database;
  }

  /** Spillway's CPUs, as taskset lists them. */
  String spillway() {
    return spillway;
  }

  /** Puts the server whose postmaster this is, and every process it has started, on its CPUs. */
  void pinDatabase(long postmaster) throws IOException, InterruptedException {
    List<Long> pids = new ArrayList<>();
    pids.add(postmaster);
    ProcessHandle.of(postmaster)
        .map(ProcessHandle::descendants)
        .orElseGet(Stream::empty)
        .forEach(p -> pids.add(p.pid()));
    for (long pid : pids) {
      pin(database, pid);
    }
  }

  /** Puts every thread of this process, and so every thread it starts later, on Spillway's CPUs. */
  void pinThisProcess() throws IOException, InterruptedException {
    pin(spillway, ProcessHandle.current().pid());
  }

  /** What to put before a command so that it runs on the database's CPUs. */
  List<String> onDatabaseCpus() {
    return List.of("taskset", "-c", database);
  }

  private static void pin(String cpus, long pid) throws IOException, InterruptedException {
    Process p;
    try {
      p =
          new ProcessBuilder("taskset", "-a", "-p", "-c", cpus, Long.toString(pid))
              .redirectErrorStream(true)
              .start();
    } catch (IOException e) {
      throw new IOException("Separate cores need taskset (util-linux): " + e.getMessage(), e);
    }
    String said = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
    if (p.waitFor() != 0 && ProcessHandle.of(pid).isPresent()) {
      throw new IOException(
          "taskset could not put process " + pid + " on CPUs " + cpus + ": " + said);
    }
  }
}
