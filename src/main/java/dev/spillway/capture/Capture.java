package dev.spillway.capture;

import dev.spillway.event.KafkaClients;
import dev.spillway.event.Pipeline;
import dev.spillway.event.TopicProvisioner;
import dev.spillway.jdbc.Databases;
import dev.spillway.support.AllAtOnce;
import java.io.IOException;
import java.sql.SQLException;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Change capture for every source database of a {@link CapturePlan}: one Debezium engine each, one
 * shared idempotent producer. Every database is checked before anything is changed in any of them.
 */
public final class Capture implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(Capture.class);
  public static final Duration DEFAULT_START_TIMEOUT = Duration.ofSeconds(60);

  /** How often each replication slot is asked whether the server has invalidated it. */
  static final Duration SLOT_CHECK_INTERVAL = Duration.ofSeconds(5);

  private final List<CaptureEngine> engines = new ArrayList<>();
  private final Producer<byte[], byte[]> producer;
  private final CaptureStats stats;
  private final ScheduledExecutorService slotChecks =
      Executors.newSingleThreadScheduledExecutor(
          r -> {
            Thread t = new Thread(r, "spillway-capture-slots");
            t.setDaemon(true);
            return t;
          });

  /** How long closing waits for the producer's last sends. */
  private static final Duration PRODUCER_CLOSE_WAIT = Duration.ofSeconds(5);

  private Capture(Producer<byte[], byte[]> producer, CaptureStats stats) {
    this.producer = producer;
    this.stats = stats;
  }

  /**
   * Checks and prepares each source database of the plan and starts its capture; returns once all
   * stream. On failure, whatever started is stopped again.
   *
   * @throws CaptureSetupException when a database cannot be captured as planned
   */
  public static Capture start(
      CapturePlan plan,
      Databases databases,
      CaptureSettings settings,
      CaptureStats stats,
      Clock clock)
      throws InterruptedException {
    return start(plan, databases, settings, stats, clock, SLOT_CHECK_INTERVAL);
  }

  /** As {@link #start(CapturePlan, Databases, CaptureSettings, CaptureStats, Clock)}. */
  static Capture start(
      CapturePlan plan,
      Databases databases,
      CaptureSettings settings,
      CaptureStats stats,
      Clock clock,
      Duration slotCheckInterval)
      throws InterruptedException {
    settings.checkSlotNames(plan.databases());
    for (String db : plan.databases()) {
      SourcePreparation.check(db, databases.dataSource(db), plan.tables(db));
    }
    Set<String> topics = new LinkedHashSet<>();
    plan.databases().forEach(db -> plan.routes(db).forEach(r -> topics.add(r.topic())));
    boolean inserts =
        plan.databases().stream().anyMatch(db -> plan.kinds(db).contains(ChangeKind.INSERT));
    if (inserts) {
      topics.add(settings.topics().dlq(Pipeline.BUFFERS)); // where a row too large goes
    }
    TopicProvisioner.ensure(
        settings.bootstrapServers(),
        settings.kafkaProperties(),
        topics,
        settings.partitions(),
        settings.replicationFactor());
    Capture capture = new Capture(newProducer(settings), stats);
    try {
      for (String db : plan.databases()) {
        CaptureEngine engine =
            new CaptureEngine(
                databases.endpoint(db),
                databases.dataSource(db),
                plan,
                settings,
                capture.producer,
                stats,
                clock);
        capture.engines.add(engine);
        engine.start(DEFAULT_START_TIMEOUT);
      }
      long every = slotCheckInterval.toMillis();
      capture.slotChecks.scheduleWithFixedDelay(
          () -> {
            for (CaptureEngine engine : capture.engines) {
              try {
                engine.checkSlot();
              } catch (RuntimeException e) {
                // A defect in one check must not end the others, nor those to come.
                log.warn(
                    "Checking the replication slot of database {} failed: {}",
                    engine.database(),
                    e.toString());
              }
            }
          },
          every,
          every,
          TimeUnit.MILLISECONDS);
      return capture;
    } catch (SQLException e) {
      capture.close();
      throw new CaptureSetupException("Could not prepare capture: " + e.getMessage(), e);
    } catch (RuntimeException | InterruptedException e) {
      capture.close();
      throw e;
    }
  }

  public CaptureStats stats() {
    return stats;
  }

  /** The first error that stopped a capture engine, if any did. */
  public Optional<String> failure() {
    for (CaptureEngine e : engines) {
      Throwable t = e.failure();
      if (t != null) {
        return Optional.of("Capture of database " + e.database() + " stopped: " + t.getMessage());
      }
    }
    return Optional.empty();
  }

  private static Producer<byte[], byte[]> newProducer(CaptureSettings settings) {
    return KafkaClients.producer(
        Map.of(
            ProducerConfig.LINGER_MS_CONFIG,
            1,
            ProducerConfig.COMPRESSION_TYPE_CONFIG,
            "lz4",
            ProducerConfig.BATCH_SIZE_CONFIG,
            256 * 1024),
        settings.kafkaProperties(),
        settings.bootstrapServers(),
        "spillway-capture");
  }

  private static void closeEngine(CaptureEngine e) {
    try {
      e.close();
    } catch (IOException | RuntimeException ex) {
      log.warn("Stopping capture of database {} failed: {}", e.database(), ex.getMessage());
    }
  }

  @Override
  public void close() {
    // A check under way may be stopping an engine: it ends before the engines are closed.
    slotChecks.shutdown();
    try {
      if (!slotChecks.awaitTermination(30, TimeUnit.SECONDS)) {
        log.warn("Capture's slot check did not end within 30 s");
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    // All at once: with Kafka away each engine waits its bounded close for positions it cannot
    // store, and one after another those waits would add up per database.
    AllAtOnce.run(engines, e -> "spillway-capture-close-" + e.database(), Capture::closeEngine);
    engines.clear();
    // What it still holds belongs to a batch no engine acknowledged (each waits for its sends
    // first): the slot hands it over again, so Kafka out of reach is not waited for long.
    producer.close(PRODUCER_CLOSE_WAIT);
  }
}
