package dev.spillway.bench;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Optional;
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
  void should_read_what_the_compilers_used_on_linux() {
    assumeTrue(Files.isDirectory(Path.of("/proc/self/task")), "Linux /proc");
    Optional<JitCpu> jit = JitCpu.start();
    assertThat(jit).as("HotSpot's compiler threads found").isPresent();

    double first = jit.get().seconds();
    double share = jit.get().shareOver(Duration.ofSeconds(15));

    assertThat(first).isGreaterThanOrEqualTo(0);
    assertThat(share).isGreaterThanOrEqualTo(0).isEqualTo(jit.get().lastShare());
    assertThat(jit.get().seconds()).isGreaterThanOrEqualTo(first);
  }
}
