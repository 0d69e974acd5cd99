package dev.spillway.bench;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.stream.Stream;

/**
 * CPU time this JVM's JIT compiler threads have used since it was made, read from Linux's {@code
 * /proc}. HotSpot starts and ends compiler threads as the work asks, so each is followed by its id:
 * one started since counts all it used, and one that ended counts what it had used when last seen
 * (each {@link #seconds()} looks).
 */
final class JitCpu {
  private static final Path TASKS = Path.of("/proc/self/task");

  /** Clock ticks per second of {@code /proc} times; 100 on Linux's common architectures. */
  private static final double TICKS_PER_SECOND = 100;

  private final Map<Long, Long> first;
  private final Map<Long, Long> last = new HashMap<>();
  private final List<Look> looks = new ArrayList<>();
  private double lastShare = Double.NaN;

  /** What the compilers had used at one moment. */
  private record Look(long nanos, double seconds) {}

  private JitCpu(Map<Long, Long> first) {
    this.first = first;
    looks.add(new Look(System.nanoTime(), 0));
  }

  /** From now on, when this is Linux and the JVM names its compiler threads as HotSpot does. */
  static Optional<JitCpu> start() {
    Map<Long, Long> now = compilerTicks();
    return now.isEmpty() ? Optional.empty() : Optional.of(new JitCpu(now));
  }

  /** CPU seconds the compiler threads have used since {@link #start()}. */
  synchronized double seconds() {
    last.putAll(compilerTicks());
    long ticks = 0;
    for (Map.Entry<Long, Long> e : last.entrySet()) {
      ticks += e.getValue() - first.getOrDefault(e.getKey(), 0L);
    }
    return ticks / TICKS_PER_SECOND;
  }

  /**
   * The share of one CPU the compiler threads used over about the last {@code window}: since the
   * latest earlier call at least that long ago (or since {@link #start()}), 0.25 for a quarter.
   */
  synchronized double shareOver(Duration window) {
    double used = seconds();
    long now = System.nanoTime();
    looks.add(new Look(now, used));
    while (looks.size() > 2 && now - looks.get(1).nanos() >= window.toNanos()) {
      looks.remove(0);
    }
    Look from = looks.get(0);
    lastShare = (used - from.seconds()) / Math.max(1e-9, (now - from.nanos()) / 1e9);
    return lastShare;
  }

  /** What {@link #shareOver} last said; NaN before it was asked. */
  synchronized double lastShare() {
    return lastShare;
  }

  /** User and system ticks of each live compiler thread, by thread id. */
  private static Map<Long, Long> compilerTicks() {
    Map<Long, Long> out = new HashMap<>();
    try (Stream<Path> tasks = Files.list(TASKS)) {
      tasks.forEach(
          t -> {
            try {
              String stat = Files.readString(t.resolve("stat"), StandardCharsets.US_ASCII);
              String name = stat.substring(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
              if (isCompiler(name)) {
                String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
                out.put(
                    Long.parseLong(t.getFileName().toString()),
                    Long.parseLong(f[11]) + Long.parseLong(f[12]));
              }
            } catch (IOException | RuntimeException e) {
              // the thread ended between the listing and the read
            }
          });
    } catch (IOException | RuntimeException e) {
      return Map.of();
    }
    return out;
  }

  /** HotSpot's "C1 CompilerThread0", "C2 CompilerThread1", … as the kernel shortens them. */
  static boolean isCompiler(String threadName) {
    return threadName.matches("C[12] CompilerThre.*");
  }
}
