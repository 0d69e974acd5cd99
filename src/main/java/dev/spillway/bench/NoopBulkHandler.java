package dev.spillway.bench;

import dev.spillway.buffers.BulkHandler;

/** The benchmark's bulk handler: every row succeeds at once, so only Spillway's cost shows. */
public final class NoopBulkHandler implements BulkHandler {
  @Override
  public Result handle(Batch batch) {
    return Result.success();
  }
}
