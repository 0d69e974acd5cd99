package dev.spillway.bench;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.Supplier;
import java.util.stream.Stream;

/**
 * CPU time this JVM's JIT compiler threads have used since it was made, read from Linux's {@code
 * /proc}. HotSpot starts and ends compiler threads as the work asks, so each is followed by its id
 * from look to look ({@link #seconds()}): one started since counts all it used, one that ended
 * counts what it had used at the last look before, and an id the kernel gave to a new thread (fewer
 * ticks than its last look) starts counting again, the ended thread's count kept.
 */
final class JitCpu {
  private static final Path TASKS = Path.of("/proc/self/task");

  private final Supplier<Map<Long, Long>> ticksNow;

  /** Ticks of each thread seen: at the first look that saw it (0 if started since), and now. */
  private final Map<Long, long[]> threads = new HashMap<>();

  /** Ticks used by threads whose id went to a new thread. */
  private long ended;

  private final List<Look> looks = new ArrayList<>();
  private double lastShare = Double.NaN;

  /** What the compilers had used at one moment. */
  private record Look(long nanos, double seconds) {}

  JitCpu(Supplier<Map<Long, Long>> ticksNow) {
    this(ticksNow, ticksNow.get());
  }

  private JitCpu(Supplier<Map<Long, Long>> ticksNow, Map<Long, Long> first) {
    this.ticksNow = ticksNow;
    first.forEach((id, ticks) -> threads.put(id, new long[] {ticks, ticks}));
    looks.add(new Look(System.nanoTime(), 0));
  }

  /** From now on, when this is Linux and the JVM names its compiler threads as HotSpot does. */
  static Optional<JitCpu> start() {
    Map<Long, Long> now = compilerTicks();
    return now.isEmpty() ? Optional.empty() : Optional.of(new JitCpu(JitCpu::compilerTicks, now));
  }

  /** CPU seconds the compiler threads have used since this was made. */
  synchronized double seconds() {
    ticksNow
        .get()
        .forEach(
            (id, ticks) -> {
              long[] seen = threads.get(id);
              if (seen == null) {
                threads.put(id, new long[] {0, ticks});
              } else if (ticks < seen[1]) {
                ended += seen[1] - seen[0];
                seen[0] = 0;
                seen[1] = ticks;
              } else {
                seen[1] = ticks;
              }
            });
    long used = ended;
    for (long[] seen : threads.values()) {
      used += seen[1] - seen[0];
    }
    return used / ProcStat.TICKS_PER_SECOND;
  }

  /**
   * The share of one CPU the compiler threads used over about the last {@code window}: since the
   * latest earlier call at least that long ago (or since this was made), 0.25 for a quarter.
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
  static Map<Long, Long> compilerTicks() {
    Map<Long, Long> out = new HashMap<>();
    try (Stream<Path> tasks = Files.list(TASKS)) {
      tasks.forEach(
          t ->
              ProcStat.read(t.resolve("stat"))
                  .filter(s -> isCompiler(s.name()))
                  .ifPresent(s -> out.put(s.id(), s.ownTicks())));
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
