package dev.spillway.support;

import java.util.Collection;
import java.util.Optional;
import java.util.function.ToIntFunction;

/** How far a mistyped name is from the names it may have meant. */
public final class Slips {
  private Slips() {}

  /**
   * Edits (a letter changed, left out, added, or two next to each other swapped) that make {@code
   * a} into {@code b}.
   */
  public static int distance(String a, String b) {
    int[][] d = new int[a.length() + 1][b.length() + 1];
    for (int i = 0; i <= a.length(); i++) {
      for (int j = 0; j <= b.length(); j++) {
        if (i == 0 || j == 0) {
          d[i][j] = i + j;
          continue;
        }
        int change = a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1;
        d[i][j] = Math.min(Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1), d[i - 1][j - 1] + change);
        if (i > 1
            && j > 1
            && a.charAt(i - 1) == b.charAt(j - 2)
            && a.charAt(i - 2) == b.charAt(j - 1)) {
          d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
        }
      }
    }
    return d[a.length()][b.length()];
  }

  /**
   * The name {@code word} is a slip of, if one is near: two edits at most, one in a word of three
   * (in a short word, two make another word).
   */
  public static Optional<String> nearest(String word, Collection<String> names) {
    return nearest(names, name -> distance(word, name), word.length() <= 3 ? 1 : 2);
  }

  /**
   * The name nearest by {@code distance}, if one is at most {@code most} away; of names as near,
   * the first.
   */
  public static Optional<String> nearest(
      Collection<String> names, ToIntFunction<String> distance, int most) {
    String best = null;
    int fewest = most + 1;
    for (String name : names) {
      int d = distance.applyAsInt(name);
      if (d < fewest) {
        best = name;
        fewest = d;
      }
    }
    return Optional.ofNullable(best);
  }
}
