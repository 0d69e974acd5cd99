package dev.spillway.runtime;

import com.fasterxml.jackson.databind.DeserializationFeature;
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
  /**
   * Reads what a process of another version published too, passing over what it adds (an upgrade
   * leaves the old one running until it is restarted).
   */
  private static final ObjectMapper JSON =
      new ObjectMapper().disable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES);

  /**
   * The directories this process holds. Asked whether one is held, this process answers from here:
   * on Linux, closing any channel to the lock file would let go of the process's lock on it.
   */
  private static final java.util.Set<Path> HELD =
      java.util.concurrent.ConcurrentHashMap.newKeySet();

  private static final String RUNTIME_FILE = "runtime.json";

  /**
   * Written by {@code run} with an embedded part once its pipelines are checked, the time of its
   * last such start; deleted by hand to let the quickstart take that state over.
   */
  public static final String EMBEDDED_RUN_FILE = "run-embedded";

  private final Path root;

  /** Its key in {@link #HELD}. */
  private final Path heldAs;

  private final FileChannel lockChannel;
  private final FileLock lock;

  private WorkingDirectory(Path root, Path heldAs, FileChannel lockChannel, FileLock lock) {
    this.root = root;
    this.heldAs = heldAs;
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
    if (HELD.contains(held(root))) {
      // Its lock probed through a channel of its own would be let go of when that one closes.
      throw new IllegalStateException("Working directory " + root + " is in use by this process.");
    }
    FileChannel channel =
        FileChannel.open(root.resolve("lock"), StandardOpenOption.CREATE, StandardOpenOption.WRITE);
    FileLock lock = null;
    Path heldAs = held(root);
    try {
      try {
        lock = channel.tryLock();
      } catch (OverlappingFileLockException e) {
        lock = null;
      }
      if (lock == null) {
        throw new IllegalStateException(
            "Working directory " + root + " is in use by another Spillway process.");
      }
      HELD.add(heldAs);
      // Left by a process killed outright, it would name ports no longer served, and a pid that
      // may be this one's (in a container, each process is pid 1), until this one publishes its
      // own.
      Files.deleteIfExists(root.resolve(RUNTIME_FILE));
      return new WorkingDirectory(root, heldAs, channel, lock);
    } catch (IOException | RuntimeException e) {
      // Held by nothing that could close it, the lock would refuse this process's next try.
      if (lock != null) {
        HELD.remove(heldAs);
      }
      channel.close();
      throw e;
    }
  }

  public Path root() {
    return root;
  }

  public Path resolve(String child) {
    return root.resolve(child);
  }

  /**
   * Marks the directory as one {@code run} kept an embedded PostgreSQL or Kafka in: their slot,
   * topics and consumer groups hold its work, which the quickstart would take over.
   */
  public static void markEmbeddedRun(Path root) throws IOException {
    Files.writeString(root.resolve(EMBEDDED_RUN_FILE), java.time.Instant.now() + "\n");
  }

  /** Whether {@code run} kept an embedded PostgreSQL or Kafka in {@code root}. */
  public static boolean embeddedRun(Path root) {
    return Files.exists(root.resolve(EMBEDDED_RUN_FILE));
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

  /**
   * Whether a process, this one included, holds the directory's lock. Another process's is probed
   * with a shared lock, which the holder's exclusive one refuses, read-only (a user who may not
   * write the file may ask too); one that may not read it is taken at its pid's word.
   */
  private static boolean locked(Path root) {
    if (HELD.contains(held(root))) {
      return true;
    }
    try (FileChannel channel = FileChannel.open(root.resolve("lock"), StandardOpenOption.READ)) {
      FileLock probe = channel.tryLock(0, Long.MAX_VALUE, true);
      if (probe == null) {
        return true;
      }
      probe.release();
      return false;
    } catch (OverlappingFileLockException e) {
      return true;
    } catch (java.nio.file.NoSuchFileException e) {
      return false;
    } catch (IOException e) {
      return true;
    }
  }

  /**
   * The directory as {@link #HELD} knows it: its real path, so one reached through a symbolic link
   * is the same directory; as written when it cannot be resolved (gone).
   */
  private static Path held(Path root) {
    try {
      return root.toRealPath();
    } catch (IOException e) {
      return root.toAbsolutePath().normalize();
    }
  }

  @Override
  public void close() throws IOException {
    try {
      Files.deleteIfExists(root.resolve(RUNTIME_FILE));
    } finally {
      HELD.remove(heldAs);
      lock.release();
      lockChannel.close();
    }
  }
}
