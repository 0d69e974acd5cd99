package dev.spillway.runtime;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.DirectoryNotEmptyException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class WorkingDirectoryTest {
  /** As a process would publish itself: this JVM's pid, which is alive. */
  private static final RuntimeInfo INFO =
      new RuntimeInfo(ProcessHandle.current().pid(), 8088, "localhost:9092", Map.of());

  @Test
  void should_find_a_process_that_holds_the_directory() throws Exception {
    try (WorkingDirectory dir = WorkingDirectory.acquire(tmp.resolve("wd"))) {
      dir.publish(INFO);

      assertThat(WorkingDirectory.running(dir.root())).hasValue(INFO);
    }
    assertThat(WorkingDirectory.running(tmp.resolve("wd"))).as("gone with it").isEmpty();
  }

  @Test
  void should_find_a_process_of_another_version_that_publishes_more() throws Exception {
    Path root = tmp.resolve("wd");
    try (WorkingDirectory dir = WorkingDirectory.acquire(root)) {
      dir.publish(INFO);
      String published = Files.readString(root.resolve("runtime.json"));
      Files.writeString(
          root.resolve("runtime.json"),
          published.replaceFirst("\\{", "{ \"addedLater\": {\"x\": 1},"));

      assertThat(WorkingDirectory.running(root)).hasValue(INFO);
    }
  }

  @Test
  void should_let_go_of_the_directory_when_the_file_left_behind_cannot_be_removed()
      throws Exception {
    Path root = tmp.resolve("wd");
    Files.createDirectories(root.resolve("runtime.json").resolve("in-the-way"));

    assertThatThrownBy(() -> WorkingDirectory.acquire(root))
        .isInstanceOf(DirectoryNotEmptyException.class);
    assertThatThrownBy(() -> WorkingDirectory.acquire(root))
        .as("the same cause again, not a lock this process forgot it holds")
        .isInstanceOf(DirectoryNotEmptyException.class);

    Files.delete(root.resolve("runtime.json").resolve("in-the-way"));
    try (WorkingDirectory dir = WorkingDirectory.acquire(root)) {
      assertThat(dir.root()).isEqualTo(root);
    }
  }

  @Test
  void should_not_take_a_live_pid_for_the_process_a_file_left_behind_names() throws Exception {
    Path root = tmp.resolve("wd");
    try (WorkingDirectory dir = WorkingDirectory.acquire(root)) {
      dir.publish(INFO);
      Files.copy(root.resolve("runtime.json"), tmp.resolve("left.json"));
    }
    // Killed outright: the lock went with the process, the file stayed, and its pid is another's.
    Files.copy(tmp.resolve("left.json"), root.resolve("runtime.json"));

    assertThat(WorkingDirectory.running(root)).isEmpty();
  }

  @Test
  void should_not_take_the_file_a_killed_process_left_for_the_new_holders() throws Exception {
    Path root = tmp.resolve("wd");
    try (WorkingDirectory dir = WorkingDirectory.acquire(root)) {
      dir.publish(INFO);
      Files.copy(root.resolve("runtime.json"), tmp.resolve("left.json"));
    }
    // Killed outright, then started again: in a container the new process has the old one's pid,
    // alive, and holds the lock, but has not published its own ports yet.
    Files.copy(tmp.resolve("left.json"), root.resolve("runtime.json"));
    try (WorkingDirectory dir = WorkingDirectory.acquire(root)) {
      assertThat(WorkingDirectory.running(root)).as("not published yet").isEmpty();
    }
  }

  @Test
  void should_know_a_directory_it_holds_when_reached_through_a_symbolic_link() throws Exception {
    Path root = tmp.resolve("wd");
    try (WorkingDirectory dir = WorkingDirectory.acquire(root)) {
      Path link = Files.createSymbolicLink(tmp.resolve("link"), root);

      assertThatThrownBy(() -> WorkingDirectory.acquire(link))
          .hasMessage("Working directory " + link + " is in use by this process.");
      dir.publish(INFO);
      assertThat(WorkingDirectory.running(link)).hasValue(INFO);
    }
    assertThat(WorkingDirectory.running(tmp.resolve("link"))).as("let go").isEmpty();
  }

  @Test
  void should_keep_holding_the_directory_after_saying_whether_it_is_held() throws Exception {
    Path locks = Path.of("/proc/locks");
    assumeTrue(Files.isReadable(locks), "the kernel lists its file locks in /proc/locks");
    try (WorkingDirectory dir = WorkingDirectory.acquire(tmp.resolve("wd"))) {
      dir.publish(INFO);
      String inode = String.valueOf(Files.getAttribute(dir.resolve("lock"), "unix:ino"));

      assertThat(WorkingDirectory.running(dir.root())).hasValue(INFO);
      assertThatThrownBy(() -> WorkingDirectory.acquire(dir.root()))
          .hasMessage("Working directory " + dir.root() + " is in use by this process.");

      assertThat(Files.readAllLines(locks))
          .as("this process's lock on the directory, still there")
          .anyMatch(
              l ->
                  l.contains(" " + ProcessHandle.current().pid() + " ")
                      && l.matches(".*:" + inode + " .*"));
    }
  }

  @TempDir Path tmp;
}
