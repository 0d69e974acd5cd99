package dev.spillway.bench;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/** Real taskset on real processes; the test JVM itself is never pinned. */
class CpuSplitIT {
  @Test
  void should_put_a_process_and_what_it_started_on_the_database_cpus() throws Exception {
    assumeTrue(CpuSplit.allowed().size() >= 2, "needs 2 CPUs");
    assumeTrue(tasksetRuns(), "needs util-linux's taskset");
    CpuSplit split = CpuSplit.halves(CpuSplit.allowed());
    Process parent = new ProcessBuilder("sh", "-c", "sleep 60 & wait").start();
    try {
      long child = awaitChild(parent);
      assertThat(allowed(parent.pid())).isNotEqualTo(split.database());

      split.pinDatabase(parent.pid());

      assertThat(allowed(parent.pid())).isEqualTo(split.database());
      assertThat(allowed(child)).isEqualTo(split.database());
    } finally {
      parent.descendants().forEach(ProcessHandle::destroy);
      parent.destroy();
    }
  }

  @Test
  void should_launch_a_command_on_the_database_cpus() throws Exception {
    assumeTrue(CpuSplit.allowed().size() >= 2, "needs 2 CPUs");
    assumeTrue(tasksetRuns(), "needs util-linux's taskset");
    CpuSplit split = CpuSplit.halves(CpuSplit.allowed());
    List<String> command = new ArrayList<>(split.onDatabaseCpus());
    command.addAll(List.of("grep", "Cpus_allowed_list", "/proc/self/status"));
    Process p = new ProcessBuilder(command).start();
    String said = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertThat(p.waitFor()).isZero();
    assertThat(said.strip()).endsWith("\t" + split.database());
  }

  private static boolean tasksetRuns() {
    try {
      return new ProcessBuilder("taskset", "-V").start().waitFor() == 0;
    } catch (java.io.IOException | InterruptedException e) {
      return false;
    }
  }

  private static long awaitChild(Process parent) {
    return await()
        .atMost(Duration.ofSeconds(5))
        .until(() -> parent.children().findFirst(), Optional::isPresent)
        .orElseThrow()
        .pid();
  }

  private static String allowed(long pid) throws Exception {
    return Files.readAllLines(Path.of("/proc", Long.toString(pid), "status")).stream()
        .filter(l -> l.startsWith("Cpus_allowed_list:"))
        .map(l -> l.substring(l.indexOf(':') + 1).strip())
        .findFirst()
        .orElseThrow();
  }
}
