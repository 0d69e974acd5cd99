package dev.spillway.bench;

import java.util.Arrays;

/** Latency samples in microseconds and their percentiles. Not thread-safe. */
public final class Samples {
  private long[] values = new long[1024];
  private int size;
  private boolean sorted = true;

  public void add(long micros) {
    if (size == values.length) {
      values = Arrays.copyOf(values, size * 2);
    }
    values[size++] = micros;
    sorted = false;
  }

  public int size() {
    return size;
  }

  /**
   * @param p between 0 and 100
   * @return the nearest-rank percentile, or 0 without samples
   */
  public long percentile(double p) {
    if (size == 0) {
      return 0;
    }
    if (!sorted) {
      Arrays.sort(values, 0, size); // once for every percentile until the next add
      sorted = true;
    }
    int rank = (int) Math.ceil(p / 100.0 * size);
    return values[Math.max(0, Math.min(size - 1, rank - 1))];
  }

  /** The mean, or 0 without samples. */
  public double mean() {
    if (size == 0) {
      return 0;
    }
    double sum = 0;
    for (int i = 0; i < size; i++) {
      sum += values[i];
    }
    return sum / size;
  }

  /** Every sample, in no particular order (percentiles sort them in place). */
  public void forEach(java.util.function.LongConsumer action) {
    for (int i = 0; i < size; i++) {
      action.accept(values[i]);
    }
  }

  public long max() {
    return percentile(100);
  }
}
