package dev.spillway.bench;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.SQLException;
import java.util.Optional;
import java.util.function.LongPredicate;
import java.util.stream.Stream;
import javax.sql.DataSource;

/**
 * CPU time spent by a local PostgreSQL server, read from Linux's {@code /proc}: the postmaster and
 * its live processes (backends, the WAL sender, autovacuum), plus what its ended processes used.
 * This is the work a design costs the database itself, apart from whatever else shares the machine.
 */
final class DatabaseCpu {
  /** Clock ticks per second of {@code /proc} times; 100 on Linux's common architectures. */
  private static final double TICKS_PER_SECOND = 100;

  private final long postmaster;

  private DatabaseCpu(long postmaster) {
    this.postmaster = postmaster;
  }

  /** The server behind {@code ds}, when it runs on this Linux machine. */
  static Optional<DatabaseCpu> of(DataSource ds) {
    try {
      long backend = BenchSql.single(ds, "SELECT pg_backend_pid()");
      Optional<long[]> stat = stat(backend);
      if (stat.isEmpty()) {
        return Optional.empty();
      }
      DatabaseCpu cpu = new DatabaseCpu(stat.get()[0]);
      return cpu.seconds() > 0 ? Optional.of(cpu) : Optional.empty();
    } catch (SQLException | RuntimeException e) {
      return Optional.empty();
    }
  }

  /** The server's postmaster: the parent of its processes. */
  long postmaster() {
    return postmaster;
  }

  /** CPU seconds the server has used so far. */
  double seconds() {
    long ticks = stat(postmaster).map(s -> s[1] + s[2]).orElse(0L);
    return (ticks + childTicks(pid -> true)) / TICKS_PER_SECOND;
  }

  /**
   * CPU seconds its live WAL senders have used so far: for a logical replication slot, the decoding
   * of all the server's WAL and the sending of what the publication holds.
   */
  double walSenderSeconds() {
    return childTicks(DatabaseCpu::isWalSender) / TICKS_PER_SECOND;
  }

  private long childTicks(LongPredicate which) {
    try (Stream<Path> procs = Files.list(Path.of("/proc"))) {
      return procs
          .map(p -> p.getFileName().toString())
          .filter(n -> n.chars().allMatch(Character::isDigit))
          .mapToLong(Long::parseLong)
          .filter(which)
          .mapToObj(DatabaseCpu::stat)
          .flatMap(Optional::stream)
          .filter(s -> s[0] == postmaster)
          .mapToLong(s -> s[1])
          .sum();
    } catch (IOException e) {
      return 0;
    }
  }

  /** Whether the process's title, which PostgreSQL sets, names a WAL sender. */
  private static boolean isWalSender(long pid) {
    try {
      byte[] title = Files.readAllBytes(Path.of("/proc", Long.toString(pid), "cmdline"));
      return new String(title, StandardCharsets.UTF_8).startsWith("postgres: walsender ");
    } catch (IOException | RuntimeException e) {
      return false;
    }
  }

  /**
   * Of one process: its parent, its own user+system ticks, and the ticks of its ended children.
   * Empty when it is gone or not readable.
   */
  private static Optional<long[]> stat(long pid) {
    try {
      String s = Files.readString(Path.of("/proc", Long.toString(pid), "stat"));
      // Fields after the command name, which is in parentheses and may hold spaces.
      String[] f = s.substring(s.lastIndexOf(')') + 2).split(" ");
      long parent = Long.parseLong(f[1]);
      long own = Long.parseLong(f[11]) + Long.parseLong(f[12]);
      long children = Long.parseLong(f[13]) + Long.parseLong(f[14]);
      return Optional.of(new long[] {parent, own, children});
    } catch (IOException | RuntimeException e) {
      return Optional.empty();
    }
  }
}
