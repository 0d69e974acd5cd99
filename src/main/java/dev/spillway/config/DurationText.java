package dev.spillway.config;

import java.time.Duration;
import java.time.format.DateTimeParseException;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The written form of durations in the configuration: {@code 500ms}, {@code 2s}, {@code 10m},
 * {@code 1h}, {@code 1d}, or ISO-8601 such as {@code PT2S}. The same form is used when the
 * configuration is described, so a logged value can be pasted back into the file.
 */
public final class DurationText {
  /**
   * The longest duration Spillway takes for a setting or option: longer than any wait, interval or
   * timeout it has a use for, and short enough that no arithmetic on it in nanoseconds overflows.
   */
  public static final Duration MAX = Duration.ofDays(365);

  private static final Pattern SHORT = Pattern.compile("(\\d+)\\s*(ms|s|m|h|d)");

  private DurationText() {}

  /** The duration written in {@code text}, or empty when it is not one of the accepted forms. */
  public static Optional<Duration> parse(String text) {
    String s = text.trim();
    Matcher m = SHORT.matcher(s);
    try {
      if (m.matches()) {
        long amount = Long.parseLong(m.group(1));
        return Optional.of(
            switch (m.group(2)) {
              case "ms" -> Duration.ofMillis(amount);
              case "s" -> Duration.ofSeconds(amount);
              case "m" -> Duration.ofMinutes(amount);
              case "h" -> Duration.ofHours(amount);
              default -> Duration.ofDays(amount);
            });
      }
      if (s.startsWith("P") || s.startsWith("p")) {
        return Optional.of(Duration.parse(s));
      }
    } catch (NumberFormatException | ArithmeticException | DateTimeParseException e) {
      // Too large or malformed: the caller names the key and shows the accepted forms.
    }
    return Optional.empty();
  }

  /** The shortest exact short form: {@code 10ms}, {@code 90s}, {@code 1h}; ISO-8601 otherwise. */
  public static String format(Duration d) {
    if (d.isNegative() || d.toNanosPart() % 1_000_000 != 0) {
      return d.toString();
    }
    long ms;
    try {
      ms = d.toMillis();
    } catch (ArithmeticException e) {
      return d.toString();
    }
    if (ms == 0) {
      return "0s";
    }
    if (ms % 86_400_000 == 0) {
      return ms / 86_400_000 + "d";
    }
    if (ms % 3_600_000 == 0) {
      return ms / 3_600_000 + "h";
    }
    if (ms % 60_000 == 0) {
      return ms / 60_000 + "m";
    }
    if (ms % 1000 == 0) {
      return ms / 1000 + "s";
    }
    return ms + "ms";
  }
}
