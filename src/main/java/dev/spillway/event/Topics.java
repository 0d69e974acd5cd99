package dev.spillway.event;

import java.util.List;
import java.util.Objects;
import java.util.regex.Pattern;

/**
 * Every topic name Spillway uses, in one place: {@code <prefix>.<pipeline>.<entity>}. Nothing else
 * builds a topic name.
 */
public final class Topics {
  public static final String DEFAULT_PREFIX = "spillway";

  /** Kafka's longest topic name. */
  public static final int MAX_NAME_LENGTH = 249;

  private static final Pattern LEGAL = Pattern.compile("[a-zA-Z0-9._-]+");

  private final String prefix;

  public Topics(String prefix) {
    if (!LEGAL.matcher(Objects.requireNonNull(prefix)).matches()) {
      throw new IllegalArgumentException("Illegal topic prefix '" + prefix + "'");
    }
    this.prefix = prefix;
  }

  public String prefix() {
    return prefix;
  }

  /** Deletes of loose-foreign-key parents, keyed by parent table. */
  public String deletedRecords() {
    return name(Pipeline.LFK, "deleted-records");
  }

  /** Deleted parent rows grouped per parent table, claimed by the cleanup workers. */
  public String cleanupBatches() {
    return name(Pipeline.LFK, "cleanup-batches");
  }

  /** Inserts into one buffer table. */
  public String bufferEvents(String buffer) {
    return name(Pipeline.BUFFERS, checked(buffer) + ".events");
  }

  /** How a buffer's batches topic's name ends; no other topic's does. */
  public static final String BUFFER_BATCHES_SUFFIX = ".batches";

  /** One buffer's batches, taken and run by the sink workers. */
  public String bufferBatches(String buffer) {
    return batches(Pipeline.BUFFERS, checked(buffer) + BUFFER_BATCHES_SUFFIX);
  }

  /** Batches a sink worker takes and runs; the consumer group is the claim. */
  public String batches(Pipeline pipeline, String entity) {
    return name(pipeline, checked(entity));
  }

  /** Batches waiting for their consume-after time before they return to the batches topic. */
  public String delayed(Pipeline pipeline) {
    return name(pipeline, "delayed");
  }

  private static final String SINK_GROUP = "sink";
  private static final String DELAY_GROUP = "delay";

  /** The consumer group of a pipeline's sink workers. */
  public String sinkGroup(Pipeline pipeline) {
    return name(pipeline, SINK_GROUP);
  }

  /** The consumer group releasing a pipeline's delayed batches. */
  public String delayGroup(Pipeline pipeline) {
    return name(pipeline, DELAY_GROUP);
  }

  /**
   * Whether a Kafka Streams application of this name would have the id of one of its pipeline's own
   * consumer groups, and so join it.
   */
  public static boolean namesOwnGroup(String name) {
    return name.equals(SINK_GROUP) || name.equals(DELAY_GROUP);
  }

  /**
   * The application id of a pipeline's Kafka Streams application: its consumer group, and the
   * prefix of its changelog and repartition topics.
   *
   * @throws IllegalArgumentException for a name one of the pipeline's own consumer groups has
   */
  public String streamsApplication(Pipeline pipeline, String name) {
    if (namesOwnGroup(name)) {
      throw new IllegalArgumentException(
          "A Streams application named '" + name + "' would join " + name(pipeline, name));
    }
    return name(pipeline, checked(name));
  }

  /**
   * The changelog Kafka Streams keeps for a state store of a pipeline's Streams application: {@code
   * <application id>-<store>-changelog}.
   */
  public String changelog(Pipeline pipeline, String application, String store) {
    return streamsApplication(pipeline, application) + "-" + checked(store) + "-changelog";
  }

  /** Records a pipeline could not process, with the reason in headers. */
  public String dlq(Pipeline pipeline) {
    return name(pipeline, "dlq");
  }

  /**
   * Which of a pipeline's dead letters were replayed, and when: one record per replay of one, keyed
   * by its position in the dead-letter topic.
   */
  public String replays(Pipeline pipeline) {
    return name(pipeline, "replays");
  }

  /**
   * Whether capture writes the topic, for the first stage of a pipeline to read: a loose foreign
   * key's parent deletes or a buffer's inserts.
   */
  public boolean isCaptured(String topic) {
    return topic.equals(deletedRecords())
        || (topic.startsWith(name(Pipeline.BUFFERS, "")) && topic.endsWith(".events"));
  }

  /**
   * Whether a pipeline's sink or delay releaser reads the topic: its batches (the cleanup batches,
   * a buffer's) or its delayed batches.
   */
  public boolean isClaimed(String topic) {
    for (Pipeline p : Pipeline.values()) {
      if (topic.equals(delayed(p))) {
        return true;
      }
    }
    return topic.equals(cleanupBatches())
        || (topic.startsWith(name(Pipeline.BUFFERS, "")) && topic.endsWith(BUFFER_BATCHES_SUFFIX));
  }

  /** Debezium's source offsets (one partition, compacted). */
  public String captureOffsets() {
    return prefix + ".capture.offsets";
  }

  /**
   * Whether a topic, consumer group or application id is one of this prefix's, {@code
   * <prefix>.<pipeline>.…}; a prefix that extends this one ({@code spillway.staging}) is another
   * deployment's.
   */
  public boolean owns(String name) {
    for (Pipeline p : Pipeline.values()) {
      if (name.startsWith(prefix + "." + p.id() + ".")) {
        return true;
      }
    }
    return false;
  }

  /**
   * The dead-letter topics {@code run} makes at its start, before its stages: those of the
   * pipelines it runs, whose capture and batching write there too. A sink makes its own as it
   * starts (the sink benchmark's, of operations).
   */
  public List<String> deadLetterTopics() {
    return List.of(dlq(Pipeline.LFK), dlq(Pipeline.BUFFERS));
  }

  private String name(Pipeline pipeline, String entity) {
    return prefix + "." + pipeline.id() + "." + entity;
  }

  private static String checked(String part) {
    if (!LEGAL.matcher(part).matches()) {
      throw new IllegalArgumentException("Illegal topic name part '" + part + "'");
    }
    return part;
  }
}
