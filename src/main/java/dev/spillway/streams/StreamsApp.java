package dev.spillway.streams;

import dev.spillway.event.KafkaClients;
import dev.spillway.event.TopicProvisioner;
import dev.spillway.support.Causes;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.TransactionAbortableException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.TopologyDescription;
import org.apache.kafka.streams.errors.MissingSourceTopicException;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One pipeline's Kafka Streams application in this process: its topology, an application id that
 * names its consumer group and changelogs, and a state directory under the working directory. More
 * processes with the same id share the input partitions.
 */
public final class StreamsApp implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(StreamsApp.class);
  private static final Duration START_TIMEOUT = Duration.ofSeconds(60);
  private static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(30);

  /**
   * How long stream threads are replaced while a topic the application reads is missing, from the
   * first one it ended: a consumer whose metadata is not fresh yet right after the topics were made
   * misses them for a moment; one missing longer was deleted.
   */
  static final Duration MISSING_SOURCE_GRACE = Duration.ofSeconds(30);

  /**
   * How long Kafka may take to say which topics it has, once a stream thread ended on a topic it
   * did not know: a topic it writes, deleted, ends a thread only once a record for it has waited
   * the producer's {@code max.block.ms} (60 s unless set), so this adds little to that.
   */
  private static final Duration TOPICS_ANSWER_WAIT = Duration.ofSeconds(10);

  /** When ({@code System.nanoTime()}) a missing source topic first ended a thread; see below. */
  private long missingSince;

  /** Whether a missing source topic ended a thread since the application last ran. */
  private boolean missing;

  private final String applicationId;
  private final KafkaStreams streams;
  private volatile String failure;

  private StreamsApp(String applicationId, KafkaStreams streams) {
    this.applicationId = applicationId;
    this.streams = streams;
  }

  /**
   * Starts the application and returns once it is RUNNING.
   *
   * @param commitInterval how often the input read, the stores' changes and the records emitted
   *     since the last commit are committed together, in one transaction (exactly once): how long
   *     an emitted record waits to be seen by readers of committed records, and what a crash makes
   *     the application process again.
   * @param tick how often the topology's wall-clock punctuators run; the thread waits for input no
   *     longer than {@link Batcher#poll} of it (Kafka Streams' {@code poll.ms}), as a punctuator
   *     cannot run while it waits
   * @throws IllegalStateException when it fails before it runs, saying why, or does not reach
   *     RUNNING within a minute
   */
  public static StreamsApp start(
      String applicationId,
      Topology topology,
      String bootstrapServers,
      Map<String, String> kafkaProperties,
      Path stateDir,
      Duration commitInterval,
      Duration tick,
      short replicationFactor)
      throws InterruptedException {
    Properties p =
        properties(
            applicationId,
            bootstrapServers,
            kafkaProperties,
            stateDir,
            commitInterval,
            tick,
            replicationFactor);
    KafkaStreams streams = new KafkaStreams(topology, p);
    List<String> writes = written(topology, applicationId);
    StreamsApp app = new StreamsApp(applicationId, streams);
    CountDownLatch running = new CountDownLatch(1); // or failed: no use waiting on
    streams.setStateListener(
        (now, before) -> {
          if (now == KafkaStreams.State.RUNNING
              || now == KafkaStreams.State.PENDING_ERROR
              || now == KafkaStreams.State.ERROR) {
            running.countDown();
          }
          if (now == KafkaStreams.State.RUNNING) {
            app.sourcesFound();
          }
          if (now == KafkaStreams.State.ERROR && app.failure == null) {
            app.failure = "Streams application " + applicationId + " stopped with an error";
          }
        });
    streams.setUncaughtExceptionHandler(
        e -> {
          if (e instanceof MissingSourceTopicException
              || e.getCause() instanceof MissingSourceTopicException) {
            // Topics are created before the application starts; a consumer whose metadata is not
            // fresh yet can still miss them once. A new thread asks again, for a while.
            if (app.sourceMissingBriefly(System.nanoTime())) {
              log.warn("Streams application {}: {}; retrying", applicationId, e.getMessage());
              return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
            }
            app.failure =
                "Streams application "
                    + applicationId
                    + " failed: a topic it reads has been missing for "
                    + MISSING_SOURCE_GRACE.toSeconds()
                    + " s ("
                    + e.getMessage()
                    + "); deleted while Spillway ran? A start makes it again";
            log.error(app.failure);
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
          }
          if (Causes.has(e, UnknownTopicOrPartitionException.class)) {
            // A topic it writes deleted reads as Kafka away, and a new thread would meet it again
            // without end: asked, Kafka says whether the topic is gone.
            List<String> gone = missing(bootstrapServers, kafkaProperties, writes);
            if (!gone.isEmpty()) {
              app.failure =
                  "Streams application "
                      + applicationId
                      + " failed: "
                      + (gone.size() == 1 ? "topic " + gone.get(0) : "topics " + gone)
                      + " it writes to "
                      + (gone.size() == 1 ? "is" : "are")
                      + " missing; deleted while Spillway ran? A start makes it again";
              log.error(app.failure);
              return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
            }
          }
          if (kafkaOutOfReach(e)) {
            // What the thread had not committed is aborted, and a new thread goes on from the last
            // commit once Kafka answers.
            log.warn(
                "Streams application {} could not reach Kafka ({}); a new thread takes over",
                applicationId,
                e.getMessage());
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
          }
          log.error("Streams application {} failed", applicationId, e);
          Throwable root = Causes.root(e);
          app.failure =
              "Streams application "
                  + applicationId
                  + " failed: "
                  + e.getMessage()
                  + (root == e || root.getMessage() == null ? "" : " (" + root.getMessage() + ")");
          return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
    streams.start();
    if (!running.await(START_TIMEOUT.toSeconds(), TimeUnit.SECONDS)) {
      app.close();
      throw new IllegalStateException(
          "Streams application " + applicationId + " did not start within " + START_TIMEOUT);
    }
    if (app.failure != null) { // failed while it started: a changelog it may not create, say
      app.close();
      throw new IllegalStateException(app.failure);
    }
    log.info("Streams application {} running", applicationId);
    return app;
  }

  /** Those of the topics Kafka says it does not have; none without an answer. */
  private static List<String> missing(
      String bootstrapServers, Map<String, String> kafkaProperties, List<String> topics) {
    try {
      return TopicProvisioner.missing(
          bootstrapServers, kafkaProperties, topics, TOPICS_ANSWER_WAIT);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return List.of();
    }
  }

  /**
   * The topics the topology writes to by name (not those a record's content names), and the
   * changelogs of its state stores (every store of Spillway's is logged): one deleted would be made
   * again empty at the next start, the events waiting in it gone, so it is told, not retried.
   */
  static List<String> written(Topology topology, String applicationId) {
    List<TopologyDescription.Node> nodes =
        topology.describe().subtopologies().stream().flatMap(s -> s.nodes().stream()).toList();
    return java.util.stream.Stream.concat(
            nodes.stream()
                .filter(TopologyDescription.Sink.class::isInstance)
                .map(n -> ((TopologyDescription.Sink) n).topic())
                .filter(Objects::nonNull),
            nodes.stream()
                .filter(TopologyDescription.Processor.class::isInstance)
                .flatMap(n -> ((TopologyDescription.Processor) n).stores().stream())
                .map(store -> applicationId + "-" + store + "-changelog"))
        .distinct()
        .toList();
  }

  /**
   * The producer's own words for a transaction it can only abort: sends that expired unanswered
   * (Kafka away longer than {@code delivery.timeout.ms}) left it unsure what Kafka took.
   */
  private static final String ONLY_ABORTABLE = "It is safe to abort the transaction and continue";

  /**
   * Whether a stream thread died of Kafka being out of reach, rather than of a failure a new thread
   * would meet again: a time-out (longer than {@code task.timeout.ms}), or a transaction the
   * thread's producer could only abort after its sends expired, which ends the thread when it tries
   * to commit instead.
   */
  static boolean kafkaOutOfReach(Throwable e) {
    return Causes.has(e, TimeoutException.class)
        || Causes.has(e, TransactionAbortableException.class)
        || Causes.first(
                e,
                c ->
                    c instanceof KafkaException
                        && c.getMessage() != null
                        && c.getMessage().contains(ONLY_ABORTABLE))
            .isPresent();
  }

  /** The application's client properties: tuning defaults, then the configured ones, then ours. */
  static Properties properties(
      String applicationId,
      String bootstrapServers,
      Map<String, String> kafkaProperties,
      Path stateDir,
      Duration commitInterval,
      Duration tick,
      short replicationFactor) {
    Map<String, Object> defaults = new HashMap<>();
    // The changelogs it makes, as durable as the topics Spillway makes.
    TopicProvisioner.durability(replicationFactor)
        .forEach((name, value) -> defaults.put(StreamsConfig.topicPrefix(name), value));
    defaults.putAll(
        Map.of(
            ProducerConfig.LINGER_MS_CONFIG,
            5,
            // Spillway's topologies have no global stores; left false, Kafka Streams warns about it
            // at every start: for the application, and for the main consumer's assignor, which
            // reads the Streams settings from that consumer's properties.
            StreamsConfig.PROCESSING_EXCEPTION_HANDLER_GLOBAL_ENABLED_CONFIG,
            true,
            StreamsConfig.mainConsumerPrefix(
                StreamsConfig.PROCESSING_EXCEPTION_HANDLER_GLOBAL_ENABLED_CONFIG),
            true));
    return KafkaClients.properties(
        defaults,
        kafkaProperties,
        Map.of(
            StreamsConfig.APPLICATION_ID_CONFIG,
            applicationId,
            StreamsConfig.BOOTSTRAP_SERVERS_CONFIG,
            bootstrapServers,
            StreamsConfig.STATE_DIR_CONFIG,
            stateDir.toString(),
            StreamsConfig.COMMIT_INTERVAL_MS_CONFIG,
            commitInterval.toMillis(),
            StreamsConfig.POLL_MS_CONFIG,
            Batcher.poll(tick).toMillis(),
            StreamsConfig.REPLICATION_FACTOR_CONFIG,
            (int) replicationFactor,
            StreamsConfig.PROCESSING_GUARANTEE_CONFIG,
            StreamsConfig.EXACTLY_ONCE_V2,
            StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG),
            "earliest",
            StreamsConfig.producerPrefix(ProducerConfig.ACKS_CONFIG),
            "all"));
  }

  public String applicationId() {
    return applicationId;
  }

  /**
   * Whether a source topic missing at {@code now} has been so for less than {@link
   * #MISSING_SOURCE_GRACE}, counted from the first thread it ended since the application last ran.
   */
  synchronized boolean sourceMissingBriefly(long now) {
    if (!missing) {
      missing = true;
      missingSince = now;
    }
    return now - missingSince < MISSING_SOURCE_GRACE.toNanos();
  }

  private synchronized void sourcesFound() {
    missing = false;
  }

  /** Why the application stopped on its own, if it did. */
  public Optional<String> failure() {
    return Optional.ofNullable(failure);
  }

  /**
   * Stops the application and leaves its consumer group, so an instance started next (a restart)
   * takes the partitions at once instead of after the session timeout.
   */
  @Override
  public void close() {
    streams.close(
        CloseOptions.timeout(CLOSE_TIMEOUT)
            .withGroupMembershipOperation(CloseOptions.GroupMembershipOperation.LEAVE_GROUP));
  }
}
