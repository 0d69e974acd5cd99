package dev.spillway.bench;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;

/**
 * What the benchmark reads of a Linux {@code /proc/<pid>/stat} (or a thread's {@code
 * /proc/<pid>/task/<tid>/stat}).
 *
 * @param id the process's (or thread's) id
 * @param name the command or thread name, as the kernel keeps it (at most 15 characters)
 * @param parent the parent process's id
 * @param ownTicks user and system clock ticks it has used
 * @param childTicks user and system clock ticks its ended, waited-for children used
 */
record ProcStat(long id, String name, long parent, long ownTicks, long childTicks) {
  /** Clock ticks per second of {@code /proc} times; 100 on Linux's common architectures. */
  static final double TICKS_PER_SECOND = 100;

  /** The file read and parsed; empty when it is gone or not readable. */
  static Optional<ProcStat> read(Path file) {
    try {
      return Optional.of(parse(Files.readString(file, StandardCharsets.US_ASCII)));
    } catch (IOException | RuntimeException e) {
      return Optional.empty();
    }
  }

  static ProcStat parse(String line) {
    // The name is in parentheses and may itself hold spaces and parentheses.
    int open = line.indexOf('(');
    int close = line.lastIndexOf(')');
    String[] f = line.substring(close + 2).split(" ");
    return new ProcStat(
        Long.parseLong(line.substring(0, open).strip()),
        line.substring(open + 1, close),
        Long.parseLong(f[1]),
        Long.parseLong(f[11]) + Long.parseLong(f[12]),
        Long.parseLong(f[13]) + Long.parseLong(f[14]));
  }
}
