package dev.spillway.buffers;

import dev.failsafe.Bulkhead;
import dev.failsafe.RateLimiter;
import java.time.Duration;
import java.util.Optional;

/**
 * One buffer while the pipeline runs: its settings, its table as the catalog describes it, its
 * handler and the limits every call of the handler passes through.
 */
final class RunningBuffer {
  final BufferSettings settings;
  final BufferTable table;
  final BulkHandler handler;
  final BufferMetrics metrics;
  private final Bulkhead<Object> concurrency;
  private final Optional<RateLimiter<Object>> rate;

  RunningBuffer(
      BufferSettings settings, BufferTable table, BulkHandler handler, BufferMetrics metrics) {
    this.settings = settings;
    this.table = table;
    this.handler = handler;
    this.metrics = metrics;
    this.concurrency = Bulkhead.of(settings.maxInFlight());
    this.rate =
        settings
            .rateLimit()
            .map(
                perSecond ->
                    RateLimiter.<Object>smoothBuilder(
                            Duration.ofNanos(Math.max(1, Math.round(1e9 / perSecond))))
                        .build());
  }

  /**
   * Calls the handler once it may: within {@code max-in-flight} calls at once and {@code
   * rate-limit} calls per second. An exception from the handler is a retryable failure.
   */
  BulkHandler.Result call(BulkHandler.Batch batch) throws InterruptedException {
    concurrency.acquirePermit();
    BulkHandler.Result result;
    try {
      if (rate.isPresent()) {
        rate.get().acquirePermit();
      }
      try {
        result = handler.handle(batch);
      } catch (InterruptedException e) {
        throw e;
      } catch (Exception e) {
        result =
            BulkHandler.Result.retry(
                "handler failed: " + e.getClass().getSimpleName() + ": " + e.getMessage());
      }
      if (result == null) {
        result = BulkHandler.Result.retry("handler returned no result");
      }
    } finally {
      concurrency.releasePermit();
    }
    metrics.call(result);
    return result;
  }
}
