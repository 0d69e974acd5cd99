package dev.spillway.lfk;

import dev.spillway.capture.CaptureRoute;
import dev.spillway.capture.ChangeKind;
import dev.spillway.event.CleanupBatch;
import dev.spillway.event.EventSerdes;
import dev.spillway.event.Pipeline;
import dev.spillway.event.Topics;
import dev.spillway.ops.DeadLetterReplay;
import dev.spillway.runtime.SpillwayRuntime;
import dev.spillway.streams.Batcher;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

/**
 * The loose-foreign-key pipeline in one process: deletes of parent tables are captured to the
 * deleted-records topic, the batcher groups them per parent into cleanup batches, and the cleanup
 * sink cleans the children. Start it before capture, so every part is ready for the first delete.
 */
public final class LfkPipeline {
  /** The Streams application's name within the pipeline. */
  public static final String STREAMS_NAME = "batcher";

  private final LfkSettings settings;
  private final List<CheckedKey> keys;
  private final LfkMetrics metrics;

  private LfkPipeline(LfkSettings settings, List<CheckedKey> keys, LfkMetrics metrics) {
    this.settings = settings;
    this.keys = List.copyOf(keys);
    this.metrics = metrics;
  }

  /**
   * Starts the batcher and the cleanup sink in the runtime; capture starts later with {@link
   * #routes}.
   *
   * @param keys the definitions, checked against the catalogs
   */
  public static LfkPipeline start(
      SpillwayRuntime runtime, LfkSettings settings, List<CheckedKey> keys)
      throws InterruptedException {
    Topics topics = runtime.topics();
    runtime.ensureTopics(List.of(topics.deletedRecords(), topics.cleanupBatches()));
    LfkMetrics metrics = new LfkMetrics(runtime.registry());
    runtime.startStreams(
        Pipeline.LFK,
        STREAMS_NAME,
        LfkTopology.build(topics, settings, metrics::malformed),
        Batcher.tick(settings.maxWait()));
    runtime.startSink(
        Pipeline.LFK,
        topics.cleanupBatches(),
        new LfkCleanup(keys, settings, metrics),
        settings.sink());
    return new LfkPipeline(settings, keys, metrics);
  }

  /** The parent tables of {@code definitions}, each once, in order: {@code schema.table}. */
  public static List<String> parents(List<LooseForeignKey> definitions) {
    return definitions.stream().map(d -> d.parent().toString()).distinct().sorted().toList();
  }

  /** Cleanup batches, as a replay of the dead-letter topic reads them: per parent table. */
  public static DeadLetterReplay.Batches deadLetterBatches(
      Topics topics, List<LooseForeignKey> definitions) {
    List<String> parents = parents(definitions);
    return new DeadLetterReplay.Batches(
        topics.cleanupBatches()::equals,
        value -> {
          CleanupBatch batch = EventSerdes.decodeCleanupBatch(value);
          return new DeadLetterReplay.Batch(batch.table().toString(), batch.ids().size());
        },
        parent ->
            parents.contains(parent)
                ? null
                : "no loose foreign key of this configuration has "
                    + parent
                    + " as its parent (its definitions removed?): handed back, it would clean"
                    + " nothing");
  }

  /** What capture must route: deletes of every parent table, from the database holding it. */
  public List<CaptureRoute> routes(Topics topics) {
    return routes(keys, topics);
  }

  /** What capture reads for these checked definitions, whether the pipeline runs or not. */
  public static List<CaptureRoute> routes(List<CheckedKey> keys, Topics topics) {
    Set<CaptureRoute> routes = new LinkedHashSet<>();
    for (CheckedKey k : keys) {
      routes.add(
          new CaptureRoute(
              k.parentDatabase(), k.key().parent(), ChangeKind.DELETE, topics.deletedRecords()));
    }
    return List.copyOf(routes);
  }

  public LfkSettings settings() {
    return settings;
  }

  public LfkMetrics metrics() {
    return metrics;
  }
}
