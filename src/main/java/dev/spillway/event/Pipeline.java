package dev.spillway.event;

/** The pipelines Spillway runs; each owns the topics named after it. */
public enum Pipeline {
  LFK("lfk"),
  BUFFERS("buffers"),
  OPERATIONS("operations"),
  MIGRATIONS("migrations"),
  SCHEDULER("scheduler");

  private final String id;

  Pipeline(String id) {
    this.id = id;
  }

  /** The name used in topics, metrics and the CLI. */
  public String id() {
    return id;
  }
}
