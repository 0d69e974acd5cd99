package dev.spillway.sink;

import dev.spillway.event.KafkaClients;
import dev.spillway.event.Pipeline;
import dev.spillway.event.TopicProvisioner;
import dev.spillway.event.Topics;
import dev.spillway.health.HealthGate;
import dev.spillway.health.LatencyWindow;
import dev.spillway.support.Backoff;
import io.micrometer.core.instrument.MeterRegistry;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import javax.sql.DataSource;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A pipeline's sink in this process: its worker consumers on the batches topics, and the releaser
 * of its delay topic. Every pipeline that executes SQL runs through one of these.
 */
public final class Sink implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(Sink.class);

  /** Where a sink connects and what it shares with the rest of the process. */
  public record Wiring(
      String bootstrapServers,
      Map<String, String> kafkaProperties,
      Topics topics,
      int partitions,
      short replicationFactor,
      HealthGate gate,
      Function<String, DataSource> dataSources,
      Function<String, LatencyWindow> latency,
      MeterRegistry registry,
      Clock clock) {}

  private final Pipeline pipeline;
  private final List<SinkWorker> workers = new ArrayList<>();

  /** The first wait after releasing delayed batches failed, doubled each time in a row. */
  private static final Duration RELEASE_RETRY = Duration.ofSeconds(1);

  private static final Duration RELEASE_RETRY_MAX = Duration.ofSeconds(30);

  private final DelayedReleaser releaser;
  private final Producer<byte[], byte[]> producer;
  private final SinkMetrics metrics;
  private final Thread releaserThread;
  private final Duration shutdownGrace;
  private volatile boolean running = true;
  private volatile Throwable releaserFailure;

  /** Counted down by {@link #close}: ends the releaser's wait after failures at once. */
  private final CountDownLatch closing = new CountDownLatch(1);

  private Sink(
      Pipeline pipeline,
      Producer<byte[], byte[]> producer,
      DelayedReleaser releaser,
      SinkMetrics metrics,
      Duration shutdownGrace) {
    this.pipeline = pipeline;
    this.producer = producer;
    this.releaser = releaser;
    this.metrics = metrics;
    this.shutdownGrace = shutdownGrace;
    this.releaserThread = new Thread(this::releaseLoop, "spillway-" + pipeline.id() + "-delay");
    this.releaserThread.setDaemon(true);
  }

  /**
   * Creates the pipeline's batches, delay and dead-letter topics if missing and starts its workers.
   */
  public static Sink start(
      Pipeline pipeline, String batchesTopic, BatchHandler handler, SinkSettings settings, Wiring w)
      throws InterruptedException {
    return start(
        pipeline,
        List.of(new BatchesTopic(batchesTopic, settings.maxInFlight())),
        handler,
        settings,
        w);
  }

  /**
   * A sink consuming several batches topics in one consumer group, each with its own share of
   * batches in flight; the handler tells them apart by {@link SinkRecord#topic()}. A re-enqueued or
   * delayed batch returns to the topic it came from.
   *
   * @param batchesTopics at least one
   */
  public static Sink start(
      Pipeline pipeline,
      List<BatchesTopic> batchesTopics,
      BatchHandler handler,
      SinkSettings settings,
      Wiring w)
      throws InterruptedException {
    if (batchesTopics.isEmpty()) {
      throw new IllegalArgumentException("A sink of " + pipeline.id() + " needs a batches topic");
    }
    Topics topics = w.topics();
    List<String> names = new ArrayList<>();
    batchesTopics.forEach(t -> names.add(t.name()));
    List<String> needed = new ArrayList<>(names);
    needed.add(topics.delayed(pipeline));
    TopicProvisioner.ensure(
        w.bootstrapServers(),
        w.kafkaProperties(),
        needed,
        List.of(topics.dlq(pipeline)),
        w.partitions(),
        w.replicationFactor());
    String batchesTopic = names.get(0);
    Producer<byte[], byte[]> producer = producer(w, pipeline);
    SinkMetrics metrics = new SinkMetrics(w.registry(), pipeline);
    Requeuer requeuer =
        new Requeuer(producer, topics.delayed(pipeline), topics.dlq(pipeline), w.clock());
    UnitOfWork unit =
        new UnitOfWork(
            handler,
            settings,
            w.gate(),
            requeuer,
            metrics,
            w.clock(),
            w.dataSources(),
            w.latency());
    DelayedReleaser releaser =
        new DelayedReleaser(
            consumer(w, topics.delayGroup(pipeline), 500),
            producer,
            topics.delayed(pipeline),
            names,
            topic -> TopicProvisioner.exists(w.bootstrapServers(), w.kafkaProperties(), topic),
            topics.dlq(pipeline),
            handler::deadLetterHeaders,
            w.clock(),
            Duration.ofMillis(200),
            DelayedReleaser.DEFAULT_HOLD_BYTES);
    metrics.delayedWaiting(releaser);
    Sink sink = new Sink(pipeline, producer, releaser, metrics, settings.shutdownGrace());
    for (int i = 0; i < settings.consumers(); i++) {
      SinkWorker worker =
          new SinkWorker(
              "spillway-" + pipeline.id() + "-sink-" + i,
              consumer(w, topics.sinkGroup(pipeline), settings.maxInFlight()),
              batchesTopics,
              handler,
              unit,
              w.gate(),
              settings,
              metrics);
      sink.workers.add(worker);
      worker.start();
    }
    sink.releaserThread.start();
    log.info(
        "Sink of {} consumes {} with {} worker(s), {} batch(es) in flight each",
        pipeline.id(),
        names,
        settings.consumers(),
        settings.maxInFlight());
    return sink;
  }

  public SinkMetrics metrics() {
    return metrics;
  }

  /** The first error that stopped a worker or the delay releaser, if any did. */
  public Optional<String> failure() {
    for (SinkWorker worker : workers) {
      if (worker.failure() != null) {
        return Optional.of("A sink worker of " + pipeline.id() + " stopped: " + worker.failure());
      }
    }
    Throwable releasing = releaserFailure;
    if (releasing != null) {
      return Optional.of("The delay releaser of " + pipeline.id() + " stopped: " + releasing);
    }
    return Optional.empty();
  }

  /** Delayed batches returned to the batches topic so far. */
  public long released() {
    return releaser.released();
  }

  /** Delayed batches the releaser has read and not yet released. */
  public int delayedWaiting() {
    return releaser.waiting();
  }

  /** Turns of the delay releaser, for tests that wait on progress rather than time. */
  public long releaserLoops() {
    return releaser.loops();
  }

  /** Loop iterations of all workers, for tests that wait on progress rather than time. */
  public int loops() {
    return workers.stream().mapToInt(SinkWorker::loops).sum();
  }

  /** Releases delayed batches until closed; closes the releaser's consumer on this thread. */
  private void releaseLoop() {
    try {
      release();
    } catch (Error e) {
      releaserFailure = e;
      log.error("The delay releaser of {} stopped: {}", pipeline.id(), e.toString(), e);
    } finally {
      // Kafka's consumer is for one thread: closed here, not by close() while a call of this
      // thread may still be under way.
      releaser.close();
    }
  }

  private void release() {
    int failures = 0;
    while (running) {
      try {
        releaser.runOnce();
        failures = 0;
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      } catch (ExecutionException | RuntimeException e) {
        if (!running) {
          return;
        }
        failures++;
        // Once a second at first, then less often: what failed is held and tried again.
        Duration wait = Backoff.doubling(RELEASE_RETRY, failures, RELEASE_RETRY_MAX);
        log.warn(
            "Releasing delayed batches of {} failed ({} in a row; tried again in {}): {}",
            pipeline.id(),
            failures,
            wait,
            e.getMessage());
        try {
          if (closing.await(wait.toMillis(), TimeUnit.MILLISECONDS)) {
            return;
          }
        } catch (InterruptedException interrupted) {
          Thread.currentThread().interrupt();
          return;
        }
      }
    }
  }

  /** Closes the workers with the given grace; zero abandons batches in hand like a crash. */
  public void close(Duration grace) {
    // All told at once, then waited for: none claims new batches while another drains.
    workers.forEach(worker -> worker.stop(grace));
    running = false;
    closing.countDown();
    workers.forEach(SinkWorker::awaitStopped);
    try {
      releaserThread.join(1_000); // it polls for 200 ms at a time
      if (releaserThread.isAlive()) {
        releaser.wakeup(); // waiting on Kafka, which may be away
        releaserThread.join(15_000);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    if (releaserThread.isAlive()) {
      log.warn("The delay releaser of {} did not stop within 15 s", pipeline.id());
    }
    metrics.releaserClosed();
    producer.close(Duration.ofSeconds(10));
  }

  /** Closes with the configured {@code shutdown-grace}. */
  @Override
  public void close() {
    close(shutdownGrace);
  }

  /** A sink worker's consumer, as every worker of a sink gets it: also the step-aside IT's. */
  static KafkaConsumer<byte[], byte[]> consumer(Wiring w, String group, int maxPoll) {
    Properties p =
        KafkaClients.properties(
            Map.of(
                ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG,
                "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"),
            w.kafkaProperties(),
            Map.of(
                ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG,
                w.bootstrapServers(),
                ConsumerConfig.GROUP_ID_CONFIG,
                group,
                ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG,
                false,
                ConsumerConfig.AUTO_OFFSET_RESET_CONFIG,
                "earliest",
                // A batch counts once its Streams transaction committed: one aborted by a crash
                // is formed again, maybe with more events and another group id.
                ConsumerConfig.ISOLATION_LEVEL_CONFIG,
                KafkaClients.READ_COMMITTED,
                // Claim no more than can run: the rest stays in Kafka for other workers.
                ConsumerConfig.MAX_POLL_RECORDS_CONFIG,
                maxPoll));
    return new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer());
  }

  static Producer<byte[], byte[]> producer(Wiring w, Pipeline pipeline) {
    return KafkaClients.producer(
        Map.of(ProducerConfig.LINGER_MS_CONFIG, 0),
        w.kafkaProperties(),
        w.bootstrapServers(),
        "spillway-" + pipeline.id() + "-sink");
  }
}
