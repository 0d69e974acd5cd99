package dev.spillway.bench;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.Map;
import org.junit.jupiter.api.Test;

class JitCpuTest {
  @Test
  void should_know_hotspot_compiler_threads_by_the_names_the_kernel_keeps() {
    assertThat(JitCpu.isCompiler("C2 CompilerThre")).isTrue();
    assertThat(JitCpu.isCompiler("C1 CompilerThre")).isTrue();
    assertThat(JitCpu.isCompiler("GC Thread#0")).isFalse();
    assertThat(JitCpu.isCompiler("Common-Cleaner")).isFalse();
    assertThat(JitCpu.isCompiler("pool-2-thread-1")).isFalse();
  }

  @Test
  void should_count_threads_started_since_ended_since_and_ids_given_to_new_threads() {
    Deque<Map<Long, Long>> looks = new ArrayDeque<>();
    looks.add(Map.of(1L, 500L, 2L, 40L)); // at the start
    looks.add(Map.of(1L, 560L, 2L, 70L, 3L, 20L)); // 3 started since
    looks.add(Map.of(1L, 600L, 3L, 45L)); // 2 ended
    looks.add(Map.of(1L, 610L, 3L, 45L, 2L, 5L)); // 2's id given to a new thread
    JitCpu jit = new JitCpu(looks::poll);

    assertThat(jit.seconds()).isEqualTo((60 + 30 + 20) / 100.0);
    assertThat(jit.seconds()).isEqualTo((100 + 30 + 45) / 100.0);
    assertThat(jit.seconds()).isEqualTo((110 + 30 + 45 + 5) / 100.0);
  }

  @Test
  void should_read_ticks_the_compilers_of_this_jvm_used_on_linux() {
    assumeTrue(Files.isDirectory(Path.of("/proc/self/task")), "Linux /proc");

    Map<Long, Long> ticks = JitCpu.compilerTicks();

    assertThat(ticks).as("HotSpot's compiler threads").isNotEmpty();
    // The tests' own classes were compiled on their way here.
    assertThat(ticks.values().stream().mapToLong(Long::longValue).sum()).isPositive();
    assertThat(JitCpu.start()).isPresent();
  }
}
