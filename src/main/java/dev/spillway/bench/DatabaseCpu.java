package dev.spillway.bench;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.SQLException;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.function.LongPredicate;
import java.util.stream.Stream;
import javax.sql.DataSource;

/**
 * CPU time spent by a local PostgreSQL server, read from Linux's {@code /proc}: the postmaster and
 * its live processes (backends, the WAL sender, autovacuum), plus what its ended processes used.
 * This is the work a design costs the database itself, apart from whatever else shares the machine.
 */
final class DatabaseCpu {
  private final long postmaster;

  private DatabaseCpu(long postmaster) {
    this.postmaster = postmaster;
  }

  /** The server behind {@code ds}, when it runs on this Linux machine. */
  static Optional<DatabaseCpu> of(DataSource ds) {
    try {
      long backend = BenchSql.single(ds, "SELECT pg_backend_pid()");
      Optional<ProcStat> stat = stat(backend);
      if (stat.isEmpty()) {
        return Optional.empty();
      }
      DatabaseCpu cpu = new DatabaseCpu(stat.get().parent());
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
    long ticks = stat(postmaster).map(s -> s.ownTicks() + s.childTicks()).orElse(0L);
    return (ticks + childTicks(pid -> true)) / ProcStat.TICKS_PER_SECOND;
  }

  /**
   * CPU ticks each of its live WAL senders has used so far: for a logical replication slot, the
   * decoding of all the server's WAL and the sending of what the publication holds.
   */
  WalSenders walSenders() {
    Map<Long, Long> ticks = new HashMap<>();
    children(DatabaseCpu::isWalSender).forEach(s -> ticks.put(s.id(), s.ownTicks()));
    return new WalSenders(ticks);
  }

  /** The WAL senders' CPU ticks at one moment, per process id. */
  record WalSenders(Map<Long, Long> ticksByPid) {
    /**
     * CPU seconds the WAL senders used since {@code before}: what those alive at both moments added
     * and all that ones started since used. Empty when one alive before has ended: what it used
     * after {@code before} is no longer readable.
     */
    OptionalDouble secondsSince(WalSenders before) {
      if (!ticksByPid.keySet().containsAll(before.ticksByPid.keySet())) {
        return OptionalDouble.empty();
      }
      long ticks = 0;
      for (Map.Entry<Long, Long> e : ticksByPid.entrySet()) {
        ticks += e.getValue() - before.ticksByPid.getOrDefault(e.getKey(), 0L);
      }
      return OptionalDouble.of(ticks / ProcStat.TICKS_PER_SECOND);
    }
  }

  private long childTicks(LongPredicate which) {
    return children(which).mapToLong(ProcStat::ownTicks).sum();
  }

  /** The stat of each of the postmaster's live children that {@code which} selects by pid. */
  private Stream<ProcStat> children(LongPredicate which) {
    List<ProcStat> stats;
    try (Stream<Path> procs = Files.list(Path.of("/proc"))) {
      stats =
          procs
              .map(p -> p.getFileName().toString())
              .filter(n -> n.chars().allMatch(Character::isDigit))
              .mapToLong(Long::parseLong)
              .filter(which)
              .mapToObj(DatabaseCpu::stat)
              .flatMap(Optional::stream)
              .filter(s -> s.parent() == postmaster)
              .toList();
    } catch (IOException e) {
      stats = List.of();
    }
    return stats.stream();
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

  /** Of one process; empty when it is gone or not readable. */
  private static Optional<ProcStat> stat(long pid) {
    return ProcStat.read(Path.of("/proc", Long.toString(pid), "stat"));
  }
}
