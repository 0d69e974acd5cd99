package dev.spillway.buffers;

/** What happens to a buffer's rows whose events went to the dead-letter topic. */
public enum OnExhausted {
  /** Delete them: the dead-letter topic holds the rows, the buffer table stays small. */
  DELETE,
  /** Keep them in the buffer table, for someone to look at and replay. */
  KEEP
}
