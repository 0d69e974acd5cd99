package dev.spillway.sink;

import java.util.NavigableSet;
import java.util.TreeSet;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The delayed batches a delay group released past its committed offset, as the commit's metadata
 * names them: the releaser commits a partition up to its first batch not yet released, so what
 * follows that offset in the delay topic is partly released already. Readers of the delay topic
 * (the backlog, the lag) pass over these offsets as the releaser does after a restart.
 */
public final class ReleasedPastCommit {
  private static final Logger log = LoggerFactory.getLogger(ReleasedPastCommit.class);

  /** Metadata of a commit, well under the brokers' {@code offset.metadata.max.bytes} (4,096). */
  static final int METADATA_CHARS = 3_000;

  private static final String RELEASED = "released:";

  private ReleasedPastCommit() {}

  /** The released offsets after {@code offset}, as many as fit, as distances from it. */
  public static String metadata(long offset, NavigableSet<Long> released) {
    if (released.isEmpty()) {
      return "";
    }
    StringBuilder text = new StringBuilder(RELEASED);
    for (long o : released) {
      String next = Long.toString(o - offset, Character.MAX_RADIX);
      if (text.length() + next.length() + 1 > METADATA_CHARS) {
        break; // the rest may be released again after a restart: at least once, as ever
      }
      if (text.length() > RELEASED.length()) {
        text.append(',');
      }
      text.append(next);
    }
    return text.toString();
  }

  /** The offsets a commit names as released after it; none for any other metadata. */
  public static NavigableSet<Long> offsets(OffsetAndMetadata committed) {
    NavigableSet<Long> offsets = new TreeSet<>();
    if (committed == null || !committed.metadata().startsWith(RELEASED)) {
      return offsets;
    }
    String list = committed.metadata().substring(RELEASED.length());
    try {
      for (String d : list.split(",")) {
        if (!d.isEmpty()) {
          offsets.add(committed.offset() + Long.parseLong(d, Character.MAX_RADIX));
        }
      }
    } catch (NumberFormatException e) {
      log.warn("Ignoring unreadable metadata of a committed delay offset: {}", committed);
      offsets.clear();
    }
    return offsets;
  }
}
