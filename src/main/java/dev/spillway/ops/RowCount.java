package dev.spillway.ops;

/**
 * A count of the rows waiting in a table, as Spillway takes it: exact up to {@link #EXACT_UP_TO},
 * the planner's estimate above, so a backlog of millions is not read whole for every status call.
 */
public final class RowCount {
  /** Up to this many rows are counted exactly. */
  public static final long EXACT_UP_TO = 100_000;

  private RowCount() {}

  /** The count in words: "about" when it is an estimate. */
  public static String text(long rows) {
    String n = String.format("%,d", rows);
    return rows > EXACT_UP_TO ? "about " + n : n;
  }
}
