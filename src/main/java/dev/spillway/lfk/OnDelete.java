package dev.spillway.lfk;

import java.util.Arrays;
import java.util.Optional;

/** What happens to child rows when their parent row is deleted; GitLab's names. */
public enum OnDelete {
  /** Delete the child rows. */
  ASYNC_DELETE("async_delete"),
  /** Set the child column to NULL. */
  ASYNC_NULLIFY("async_nullify"),
  /** Set another column of the child rows to a fixed value. */
  UPDATE_COLUMN_TO("update_column_to");

  private final String yaml;

  OnDelete(String yaml) {
    this.yaml = yaml;
  }

  /** The name in the definitions file. */
  public String yaml() {
    return yaml;
  }

  /** Whether the action updates rows (and counts toward the update limit) rather than deletes. */
  public boolean updates() {
    return this != ASYNC_DELETE;
  }

  /** The action written in a definitions file; a leading colon (Ruby symbol style) is accepted. */
  public static Optional<OnDelete> parse(String text) {
    String name = text.startsWith(":") ? text.substring(1) : text;
    return Arrays.stream(values()).filter(v -> v.yaml.equals(name)).findFirst();
  }
}
