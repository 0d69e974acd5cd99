package dev.spillway.bench;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class BufferBenchTest {

  @Test
  void should_print_the_jit_compilers_cpu_of_every_phase_the_plain_one_first() {
    assertThat(BufferBench.jitCpuLine(1.5, 2.25, 13.3))
        .isEqualTo(
            "   of which this process's JIT compilers: plain 1.50, poller 2.25, Spillway 13.30 ms"
                + " per 1,000 inserts");
  }
}
