package dev.spillway.sink;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.spillway.event.Pipeline;
import dev.spillway.testing.EmbeddedInfra;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.charset.StandardCharsets;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * A batch held at STOP against a real broker, its batches written in transactions as the Streams
 * applications write them: a transaction's commit marker is no batch behind it.
 */
class SinkWorkerStepAsideIT {
  private static final Duration WAIT = Duration.ofSeconds(30);

  private final String bootstrap = EmbeddedInfra.get().bootstrapServers();
  private final String topic = "step-aside-" + UUID.randomUUID();
  private final AtomicBoolean stopLifted = new AtomicBoolean();
  private final List<Long> runs = Collections.synchronizedList(new ArrayList<>());
  private final SimpleMeterRegistry registry = new SimpleMeterRegistry();
  private final List<AutoCloseable> closing = new ArrayList<>();
  private SinkMetrics metrics;
  private SinkWorker worker;

  @AfterEach
  void close() throws Exception {
    if (worker != null) {
      worker.close(Duration.ZERO);
    }
    for (AutoCloseable c : closing) {
      c.close();
    }
  }

  @Test
  void should_keep_in_place_a_held_batch_whose_partition_holds_only_a_commit_marker_behind_it()
      throws Exception {
    try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
      admin
          .createTopics(
              List.of(
                  new NewTopic(topic, 1, (short) 1),
                  new NewTopic(topic + ".delayed", 1, (short) 1),
                  new NewTopic(topic + ".dlq", 1, (short) 1)))
          .all()
          .get();
    }
    // Two batches for the table at STOP in one transaction, its marker after them; a worker
    // claiming two at a time takes both and stops before the marker.
    try (KafkaProducer<byte[], byte[]> batcher =
        new KafkaProducer<>(
            Map.of(
                "bootstrap.servers",
                bootstrap,
                ProducerConfig.TRANSACTIONAL_ID_CONFIG,
                "batcher-" + UUID.randomUUID()),
            new ByteArraySerializer(),
            new ByteArraySerializer())) {
      batcher.initTransactions();
      batcher.beginTransaction();
      batcher.send(new ProducerRecord<>(topic, key("stopped"), new byte[0]));
      batcher.send(new ProducerRecord<>(topic, key("stopped"), new byte[0]));
      batcher.commitTransaction();
    }
    worker = worker(2, Duration.ofMillis(10));
    worker.subscribe();
    TestWorkers.turnUntil(
        worker,
        WAIT,
        "both batches claimed, the partition paused behind them",
        () -> metrics.pausedPartitionCount() == 1);

    await()
        .during(Duration.ofSeconds(3))
        .atMost(WAIT)
        .pollInterval(Duration.ofMillis(5))
        .alias("nothing stepped aside: only the marker lies behind the batches in hand")
        .until(
            () -> {
              worker.runOnce();
              return steppedAside() == 0 && runs.isEmpty();
            });

    stopLifted.set(true);
    TestWorkers.turnUntil(
        worker, WAIT, "both batches run once STOP lifted", () -> runs.size() == 2);
    assertThat(runs).as("kept in place, then run in order").containsExactly(0L, 1L);
  }

  private SinkWorker worker(int maxInFlight, Duration stepAsideAfter) {
    SinkSettings settings =
        SinkSettings.defaults().withMaxInFlight(maxInFlight).withStepAsideAfter(stepAsideAfter);
    // The sink's own clients: reading committed records, claiming max-in-flight a poll.
    Sink.Wiring wiring =
        new Sink.Wiring(
            bootstrap, Map.of(), null, 1, (short) 1, null, null, null, registry, Clock.systemUTC());
    Consumer<byte[], byte[]> consumer =
        Sink.consumer(wiring, "step-aside-" + UUID.randomUUID(), maxInFlight);
    Producer<byte[], byte[]> producer = Sink.producer(wiring, Pipeline.LFK);
    closing.add(producer);
    metrics = new SinkMetrics(registry, Pipeline.LFK);
    return TestWorkers.worker(
        consumer,
        producer,
        topic,
        maxInFlight,
        TestWorkers.byKey(runs),
        TestWorkers.stoppedTable(stopLifted::get),
        settings,
        metrics);
  }

  private double steppedAside() {
    return registry.get("spillway_sink_stepped_aside").counter().count();
  }

  private static byte[] key(String table) {
    return table.getBytes(StandardCharsets.UTF_8);
  }
}
