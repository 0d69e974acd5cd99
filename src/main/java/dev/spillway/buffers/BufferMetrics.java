package dev.spillway.buffers;

import dev.spillway.event.BufferEvent;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.distribution.ValueAtPercentile;
import java.time.Duration;
import java.util.Collection;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;

/** One buffer's meters, tagged {@code buffer=<name>}. Thread-safe. */
final class BufferMetrics {
  private final MeterRegistry registry;
  private final String buffer;
  private final AtomicInteger inFlight = new AtomicInteger();
  private final Counter handled;
  private final Counter deadLetteredBatches;
  private final Counter deadLetteredEvents;
  private final Counter malformed;
  private final Counter republished;
  private final Timer insertToHandled;

  /** How long a timed event counts in the percentiles and the max, at most, by default. */
  static final Duration DEFAULT_WINDOW = Duration.ofMinutes(2);

  /** Micrometer's window is a ring of this many histograms, one rotated out each third of it. */
  private static final int WINDOW_PARTS = 3;

  /**
   * How long a timed event surely stays in the percentiles: it leaves with its histogram, between
   * two thirds of the window and the whole window after it was recorded.
   */
  private final Duration surelyKept;

  /** When events were last timed (epoch ms); -1 before any was. */
  private volatile long lastTimedMillis = -1;

  private final Map<String, Counter> calls = new ConcurrentHashMap<>();

  private final Supplier<Number> rowsWaiting;

  /** With the {@link #DEFAULT_WINDOW}. */
  BufferMetrics(MeterRegistry registry, String buffer, Supplier<Number> rowsWaiting) {
    this(registry, buffer, rowsWaiting, DEFAULT_WINDOW);
  }

  /**
   * @param rowsWaiting the buffer table's rows, null when unknown (-1 to scrapes and status);
   *     called when metrics are scraped and for the status report, so it must answer at once
   * @param window how long a timed event counts in the insert-to-handled percentiles and max, at
   *     most
   */
  BufferMetrics(
      MeterRegistry registry, String buffer, Supplier<Number> rowsWaiting, Duration window) {
    this.registry = registry;
    this.buffer = buffer;
    this.rowsWaiting = rowsWaiting;
    this.surelyKept = window.multipliedBy(WINDOW_PARTS - 1).dividedBy(WINDOW_PARTS);
    this.handled = counter("spillway_buffer_events_handled", "Buffered rows handled and deleted");
    this.deadLetteredBatches =
        counter("spillway_buffer_dead_lettered_batches", "Batches whose rest went to the DLQ");
    this.deadLetteredEvents =
        counter("spillway_buffer_dead_lettered_events", "Buffered rows sent to the DLQ");
    this.malformed =
        counter(
            "spillway_buffer_malformed_events",
            "Captured events the batching stage could not read, sent to the DLQ");
    this.republished =
        counter(
            "spillway_buffer_republished_events",
            "Captured inserts published a second time (capture taken over), passed over");
    this.insertToHandled =
        Timer.builder("spillway_buffer_insert_to_handled")
            .description("From the inserting commit to the row's deletion after its handler")
            .tag("buffer", buffer)
            .publishPercentiles(0.5, 0.99)
            .percentilePrecision(2)
            .publishPercentileHistogram()
            .minimumExpectedValue(Duration.ofMillis(1))
            .maximumExpectedValue(Duration.ofMinutes(10))
            .distributionStatisticExpiry(window)
            .distributionStatisticBufferLength(WINDOW_PARTS)
            .register(registry);
    Gauge.builder("spillway_buffer_batches_in_flight", inFlight, AtomicInteger::get)
        .description("Batches being run: their handler called, or waiting for a call")
        .tag("buffer", buffer)
        .register(registry);
    Gauge.builder("spillway_buffer_rows_waiting", this, BufferMetrics::rowsWaiting)
        .description("Rows in the buffer table")
        .tag("buffer", buffer)
        .register(registry);
  }

  /** Rows in the buffer table as last counted; -1 when they could not be counted lately. */
  long rowsWaiting() {
    Number rows = rowsWaiting.get();
    return rows == null ? -1 : rows.longValue();
  }

  /** One captured event the batching stage sent to the dead letters. */
  void malformed() {
    malformed.increment();
  }

  /** One captured insert published a second time that the batching stage passed over. */
  void republished() {
    republished.increment();
  }

  private Counter counter(String name, String description) {
    return Counter.builder(name).description(description).tag("buffer", buffer).register(registry);
  }

  AtomicInteger inFlight() {
    return inFlight;
  }

  /**
   * Counts handled events and times them from their insert, unless they were replayed from the
   * dead-letter topic: their time would be how long they were left there.
   */
  void handled(Collection<BufferEvent> events, long nowMillis, boolean replayed) {
    if (!replayed && !events.isEmpty()) {
      for (BufferEvent e : events) {
        insertToHandled.record(
            Math.max(0, nowMillis * 1000 - e.commitTimeMicros()), TimeUnit.MICROSECONDS);
      }
      lastTimedMillis = nowMillis; // after the samples: a reading in between finds them there
    }
    // Counted after they are timed: whoever sees them counted finds their times recorded.
    handled.increment(events.size());
  }

  void deadLettered(int events) {
    deadLetteredBatches.increment();
    deadLetteredEvents.increment(events);
  }

  void call(BulkHandler.Result result) {
    calls
        .computeIfAbsent(
            result.getClass().getSimpleName().toLowerCase(java.util.Locale.ROOT),
            r ->
                Counter.builder("spillway_buffer_handler_calls")
                    .description("Bulk handler calls by result")
                    .tag("buffer", buffer)
                    .tag("result", r)
                    .register(registry))
        .increment();
  }

  long handledCount() {
    return (long) handled.count();
  }

  long deadLetteredBatchCount() {
    return (long) deadLetteredBatches.count();
  }

  long deadLetteredEventCount() {
    return (long) deadLetteredEvents.count();
  }

  long malformedCount() {
    return (long) malformed.count();
  }

  long republishedCount() {
    return (long) republished.count();
  }

  /**
   * The insert-to-handled percentile in milliseconds over the window (two minutes by default); null
   * when no event was timed in its last two thirds (80 s by default: none handled yet, only
   * replayed ones, or none lately), after which Micrometer's window may hold none and answer 0,
   * which would read as instant delivery.
   */
  Double percentileMillis(double percentile, long nowMillis) {
    long last = lastTimedMillis;
    if (last < 0 || nowMillis - last > surelyKept.toMillis()) {
      return null;
    }
    for (ValueAtPercentile v : insertToHandled.takeSnapshot().percentileValues()) {
      if (v.percentile() == percentile) {
        return v.value(TimeUnit.MILLISECONDS);
      }
    }
    return null;
  }
}
