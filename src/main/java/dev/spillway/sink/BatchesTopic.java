package dev.spillway.sink;

import java.util.Objects;

/**
 * One topic a sink consumes, with how many of its batches one consumer runs at once. A pipeline
 * with several kinds of batches (one topic per buffer table) gives each its own share, so a slow
 * one cannot take every thread.
 *
 * @param maxInFlight at least 1; the sink's own {@link SinkSettings#maxInFlight()} still caps the
 *     total
 */
public record BatchesTopic(String name, int maxInFlight) {
  public BatchesTopic {
    Objects.requireNonNull(name, "name");
    if (maxInFlight < 1) {
      throw new IllegalArgumentException("max-in-flight of " + name + " must be at least 1");
    }
  }
}
