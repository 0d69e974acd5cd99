package dev.spillway.streams;

import java.time.Duration;
import java.util.Map;
import org.apache.kafka.common.config.TopicConfig;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.StoreBuilder;
import org.apache.kafka.streams.state.Stores;

/** Topic settings of the changelogs behind the pipelines' state stores. */
public final class Changelogs {
  /**
   * How long a superseded or deleted entry stays in a changelog before compaction takes it, at
   * most, and how long a tombstone stays after.
   */
  public static final Duration COMPACTED_WITHIN = Duration.ofMinutes(10);

  private Changelogs() {}

  /**
   * An in-memory store of byte values behind a cache flushed to it and to its changelog before each
   * commit, the batching stages' stores, its changelog compacted soon. A batcher writes up to an
   * entry and a tombstone per event (its cache keeps the last write of each key between two
   * commits). By Kafka's defaults the segment being written is compacted only once it reaches 1 GiB
   * or 7 days, and compaction keeps tombstones for a day; an in-memory store is restored from its
   * changelog's start whenever its task starts (a restart, a take-over), so it would read again
   * every event of the last day and more. Here the segment is rolled at the first write after its
   * oldest record is {@link #COMPACTED_WITHIN} old and is then due for compaction, and a tombstone
   * is kept that long after: far longer than a restore of what is left takes. A reader that takes
   * longer (a standby replica lagging that much) may miss a tombstone and take back an entry
   * deleted meanwhile: its event goes out again, in a batch of another group id, whose run finds
   * the row gone once handled (and hands it over again only if it is still buffered).
   */
  public static <K> StoreBuilder<KeyValueStore<K, byte[]>> shortLivedStore(
      String name, Serde<K> keys) {
    String ms = String.valueOf(COMPACTED_WITHIN.toMillis());
    return Stores.keyValueStoreBuilder(Stores.inMemoryKeyValueStore(name), keys, Serdes.ByteArray())
        .withCachingEnabled()
        .withLoggingEnabled(
            Map.of(
                TopicConfig.MAX_COMPACTION_LAG_MS_CONFIG,
                ms,
                TopicConfig.DELETE_RETENTION_MS_CONFIG,
                ms));
  }
}
