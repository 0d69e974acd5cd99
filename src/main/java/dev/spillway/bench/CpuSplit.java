package dev.spillway.bench;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.StringJoiner;
import java.util.stream.Stream;

/**
 * The CPUs this process may use on this Linux machine in two halves, set with {@code taskset}: the
 * database server and the inserting clients on the first, this process (Spillway, its embedded
 * Kafka broker) on the second, as if Spillway ran on a machine of its own. A process or thread
 * started by a pinned one keeps its CPUs, so new database backends and new threads stay where they
 * belong.
 */
final class CpuSplit {
  private final String database;
  private final String spillway;

  private CpuSplit(String database, String spillway) {
    this.database = database;
    this.spillway = spillway;
  }

  /**
   * The first half of {@code cpus} (rounded down) for the database, the rest for Spillway.
   *
   * @param cpus the CPUs this process may run on, in ascending order ({@link #allowed()})
   * @throws IllegalArgumentException with fewer than 2 CPUs
   */
  static CpuSplit halves(List<Integer> cpus) {
    if (cpus.size() < 2) {
      throw new IllegalArgumentException(
          "Separate cores need at least 2 CPUs; this machine has " + cpus.size() + ".");
    }
    int half = cpus.size() / 2;
    return new CpuSplit(list(cpus.subList(0, half)), list(cpus.subList(half, cpus.size())));
  }

  /**
   * The CPUs this process may run on, as the kernel lists them in {@code /proc/self/status} ({@code
   * Cpus_allowed_list}): a container or a CPU manager may give it {@code 4-7} rather than {@code
   * 0-3}. Where that cannot be read, {@code 0} up to the processors the JVM counts.
   */
  static List<Integer> allowed() {
    try {
      for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
        if (line.startsWith("Cpus_allowed_list:")) {
          return parse(line.substring(line.indexOf(':') + 1).strip());
        }
      }
    } catch (IOException | RuntimeException e) {
      // Not Linux, or a kernel that does not say: the JVM's count, from 0.
    }
    List<Integer> cpus = new ArrayList<>();
    for (int i = 0; i < Runtime.getRuntime().availableProcessors(); i++) {
      cpus.add(i);
    }
    return cpus;
  }

  /** A CPU list as the kernel and taskset write it ({@code 0-3,8,10-11}), in ascending order. */
  static List<Integer> parse(String list) {
    List<Integer> cpus = new ArrayList<>();
    for (String part : list.split(",")) {
      int dash = part.indexOf('-');
      int first = Integer.parseInt(part.substring(0, dash < 0 ? part.length() : dash).strip());
      int last = dash < 0 ? first : Integer.parseInt(part.substring(dash + 1).strip());
      for (int i = first; i <= last; i++) {
        cpus.add(i);
      }
    }
    return cpus;
  }

  /** CPUs in ascending order as the kernel lists them: runs as ranges ({@code 0-3,8,10-11}). */
  private static String list(List<Integer> cpus) {
    StringJoiner out = new StringJoiner(",");
    int i = 0;
    while (i < cpus.size()) {
      int j = i;
      while (j + 1 < cpus.size() && cpus.get(j + 1) == cpus.get(j) + 1) {
        j++;
      }
      out.add(i == j ? cpus.get(i).toString() : cpus.get(i) + "-" + cpus.get(j));
      i = j + 1;
    }
    return out.toString();
  }

  /** The database's CPUs, as taskset lists them ({@code 0}, {@code 0-3}). */
  String database() {
    return database;
  }

  /** Spillway's CPUs, as taskset lists them. */
  String spillway() {
    return spillway;
  }

  /**
   * Refuses, before a benchmark deletes its last run's data and starts anything, a machine where
   * the CPUs cannot be split: fewer than 2 of them, or no {@code tool} (taskset) to run.
   *
   * @throws IllegalArgumentException saying which
   */
  static void requireSplittable(List<Integer> cpus, String tool) throws InterruptedException {
    halves(cpus);
    try {
      Process p = new ProcessBuilder(tool, "-V").redirectErrorStream(true).start();
      p.getInputStream().transferTo(java.io.OutputStream.nullOutputStream());
      if (p.waitFor() == 0) {
        return;
      }
    } catch (IOException e) {
      // not installed: said below
    }
    throw new IllegalArgumentException(
        "Separate cores need "
            + tool
            + " (util-linux), which does not run here; install it or leave --separate-cores out.");
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
