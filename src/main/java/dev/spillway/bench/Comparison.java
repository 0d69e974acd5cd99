package dev.spillway.bench;

import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;

/**
 * Figures of one measure taken in the same process run, printed with their ratio to the first (the
 * baseline). Benchmarks report ratios, never absolute pass marks from another machine.
 */
public final class Comparison {
  private record Row(String name, double value) {}

  private final String measure;
  private final String unit;
  private final List<Row> rows = new ArrayList<>();

  public Comparison(String measure, String unit) {
    this.measure = measure;
    this.unit = unit;
  }

  /** The first row added is the baseline. */
  public Comparison add(String name, double value) {
    rows.add(new Row(name, value));
    return this;
  }

  public double ratio(int index) {
    return rows.get(index).value() / rows.get(0).value();
  }

  public void print(PrintWriter out) {
    out.printf("   %-44s %12s %8s%n", measure, unit, "ratio");
    for (int i = 0; i < rows.size(); i++) {
      Row r = rows.get(i);
      out.printf(
          "   %-44s %12.2f %8s%n",
          r.name(),
          r.value(),
          // A ratio to nothing (no full-page images in the baseline, say) is no figure at all.
          rows.get(0).value() == 0 ? "-" : String.format("%.2f", ratio(i)));
    }
    out.flush();
  }
}
