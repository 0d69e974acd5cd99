package dev.spillway.support;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;

/** Checks of a directory to be made, before anything else is done that its making would undo. */
public final class Directories {
  private Directories() {}

  /**
   * The file that keeps {@code dir} from being a directory: itself, or the nearest of its parents
   * that exists, when that is not a directory; empty when making it can work.
   */
  public static Optional<Path> fileInTheWay(Path dir) {
    for (Path p = dir; p != null; p = p.getParent()) {
      if (Files.exists(p)) {
        return Files.isDirectory(p) ? Optional.empty() : Optional.of(p);
      }
    }
    return Optional.empty();
  }

  /** Says what {@link #fileInTheWay} found: {@code names <dir>, but <file> is a file, …}. */
  public static String problem(Path dir, Path file) {
    return file.equals(dir)
        ? "names " + dir + ", which is a file, not a directory"
        : "names " + dir + ", but " + file + " is a file, not a directory";
  }
}
