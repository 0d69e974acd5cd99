package dev.spillway.support;

import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.function.Predicate;

/**
 * A failure's chain of causes, walked once per link however it loops: the questions Spillway asks
 * of a failure (is it the database's, did Kafka time out, what does it say) are about its whole
 * chain, since libraries wrap what went wrong in their own exceptions.
 */
public final class Causes {
  private Causes() {}

  /** The failure, then its cause, then that one's, and so on; each link once. */
  public static List<Throwable> chain(Throwable error) {
    List<Throwable> out = new ArrayList<>();
    Set<Throwable> seen = Collections.newSetFromMap(new IdentityHashMap<>());
    for (Throwable t = error; t != null && seen.add(t); t = t.getCause()) {
      out.add(t);
    }
    return out;
  }

  /** The outermost link that matches. */
  public static Optional<Throwable> first(Throwable error, Predicate<Throwable> matches) {
    return chain(error).stream().filter(matches).findFirst();
  }

  /** Whether a link of the chain is of the type. */
  public static boolean has(Throwable error, Class<? extends Throwable> type) {
    return first(error, type::isInstance).isPresent();
  }

  /** The innermost link: what went wrong first. */
  public static Throwable root(Throwable error) {
    List<Throwable> all = chain(error);
    return all.get(all.size() - 1);
  }

  /** The message of the outermost link that says something, or null when none does. */
  public static String message(Throwable error) {
    return first(error, t -> t.getMessage() != null && !t.getMessage().isBlank())
        .map(Throwable::getMessage)
        .orElse(null);
  }
}
