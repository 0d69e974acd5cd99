package dev.spillway.runtime;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.Optional;

/**
 * The directory holding embedded broker and database data and state stores. One Spillway process
 * owns it at a time (a file lock); while it runs, {@code runtime.json} tells other commands where
 * to reach it.
 */
public final class WorkingDirectory implements AutoCloseable {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final String RUNTIME_FILE = "runtime.json";

  private final Path root;
  private final FileChannel lockChannel;
  private final FileLock lock;

  private WorkingDirectory(Path root, FileChannel lockChannel, FileLock lock) {
    this.root = root;
    this.lockChannel = lockChannel;
    this.lock = lock;
  }

  /**
   * Creates the directory if needed and takes its lock.
   *
   * @throws IllegalStateException when another process holds it
   */
  public static WorkingDirectory acquire(Path root) throws IOException {
    Files.createDirectories(root);
    FileChannel channel =
        FileChannel.open(root.resolve("lock"), StandardOpenOption.CREATE, StandardOpenOption.WRITE);
    FileLock lock;
    try {
      lock = channel.tryLock();
    } catch (OverlappingFileLockException e) {
      lock = null;
    }
    if (lock == null) {
      channel.close();
      throw new IllegalStateException(
          "Working directory " + root + " is in use by another Spillway process.");
    }
    return new WorkingDirectory(root, channel, lock);
  }

  public Path root() {
    return root;
  }

  public Path resolve(String child) {
    return root.resolve(child);
  }

  /** Publishes where this process can be reached; replaced atomically. */
  public void publish(RuntimeInfo info) throws IOException {
    Path tmp = root.resolve(RUNTIME_FILE + ".tmp");
    JSON.writerWithDefaultPrettyPrinter().writeValue(tmp.toFile(), info);
    Files.move(tmp, root.resolve(RUNTIME_FILE), StandardCopyOption.REPLACE_EXISTING);
  }

  /**
   * What a running process published in {@code root}, if one is running there: its pid is alive and
   * the directory's lock is held. A file left by a process killed outright names a pid that another
   * process may have since (after a reboot; in a container, where every command's JVM is pid 1), so
   * the lock decides.
   */
  public static Optional<RuntimeInfo> running(Path root) {
    Path file = root.resolve(RUNTIME_FILE);
    if (!Files.exists(file)) {
      return Optional.empty();
    }
    try {
      RuntimeInfo info = JSON.readValue(file.toFile(), RuntimeInfo.class);
      boolean alive = ProcessHandle.of(info.pid()).map(ProcessHandle::isAlive).orElse(false);
      return alive && locked(root) ? Optional.of(info) : Optional.empty();
    } catch (IOException e) {
      return Optional.empty();
    }
  }

  /** Whether a process, this one included, holds the directory's lock. */
  private static boolean locked(Path root) throws IOException {
    try (FileChannel channel = FileChannel.open(root.resolve("lock"), StandardOpenOption.WRITE)) {
      FileLock probe = channel.tryLock();
      if (probe == null) {
        return true; // another process's
      }
      probe.release();
      return false;
    } catch (OverlappingFileLockException e) {
      return true; // this process's own
    } catch (java.nio.file.NoSuchFileException e) {
      return false;
    }
  }

  @Override
  public void close() throws IOException {
    Files.deleteIfExists(root.resolve(RUNTIME_FILE));
    lock.release();
    lockChannel.close();
  }
}
