package dev.spillway.lfk;

import static org.assertj.core.api.Assertions.assertThat;

import dev.spillway.event.CleanupBatch;
import dev.spillway.event.EventSerdes;
import dev.spillway.event.Pipeline;
import dev.spillway.event.TableName;
import dev.spillway.event.Topics;
import dev.spillway.ops.ConsumerLag;
import dev.spillway.sink.ReleasedPastCommit;
import dev.spillway.sink.SinkHeaders;
import dev.spillway.testing.EmbeddedInfra;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.UUID;
import java.util.stream.IntStream;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.Test;

/**
 * The backlog and the lag read the delay topic as its releaser left it: from the first batch not
 * released, passing over those its commit names as released after it.
 */
class DelayedBacklogIT {
  private final String bootstrap = EmbeddedInfra.get().bootstrapServers();
  private final Topics topics =
      new Topics("d" + UUID.randomUUID().toString().replace("-", "").substring(0, 10));
  private final TableName parents = new TableName("public", "projects");

  @Test
  void should_count_no_delayed_batch_its_releaser_released_past_its_commit() throws Exception {
    String delayed = topics.delayed(Pipeline.LFK);
    TopicPartition tp = new TopicPartition(delayed, 0);
    try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
      admin.createTopics(List.of(new NewTopic(delayed, 1, (short) 1))).all().get();
    }
    try (KafkaProducer<byte[], byte[]> producer =
        new KafkaProducer<>(
            Map.of("bootstrap.servers", bootstrap),
            new ByteArraySerializer(),
            new ByteArraySerializer())) {
      // offset 0: two ids, waiting; 1: three ids, released; 2: four ids, waiting; 3: five ids,
      // waiting out a lock timeout; 4: six ids, stepped aside from a table at STOP
      for (int n : new int[] {2, 3, 4, 5, 6}) {
        List<String> ids = IntStream.rangeClosed(1, n).mapToObj(Integer::toString).toList();
        byte[] batch = EventSerdes.encode(new CleanupBatch("main", parents, ids, 1_000_000L));
        ProducerRecord<byte[], byte[]> r = new ProducerRecord<>(delayed, 0, null, batch);
        if (n == 5) {
          r.headers()
              .add(SinkHeaders.LOCK_WAITS, java.nio.ByteBuffer.allocate(4).putInt(1).array());
        } else if (n == 6) {
          r.headers()
              .add(SinkHeaders.STEPPED_ASIDE, SinkHeaders.text("public.builds is at STOP: …"));
        }
        producer.send(r).get();
      }
    }
    try (KafkaConsumer<byte[], byte[]> group =
        new KafkaConsumer<>(
            Map.of(
                ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG,
                bootstrap,
                ConsumerConfig.GROUP_ID_CONFIG,
                topics.delayGroup(Pipeline.LFK)),
            new ByteArrayDeserializer(),
            new ByteArrayDeserializer())) {
      group.assign(List.of(tp));
      String released = ReleasedPastCommit.metadata(0, new TreeSet<>(List.of(1L)));
      group.commitSync(Map.of(tp, new OffsetAndMetadata(0, released)));
    }

    assertThat(LfkBacklog.read(bootstrap, Map.of(), topics, List.of()))
        .singleElement()
        .satisfies(
            p -> {
              assertThat(p.table()).isEqualTo(parents.toString());
              assertThat(p.pending()).as("ids of batches 0, 2, 3 and 4").isEqualTo(17);
              assertThat(p.rescheduled())
                  .as("neither the lock timeout's nor the stepped aside")
                  .isEqualTo(6);
            });
    assertThat(ConsumerLag.read(bootstrap, Map.of(), topics.prefix()))
        .singleElement()
        .satisfies(
            lag -> {
              assertThat(lag.topic()).isEqualTo(delayed);
              assertThat(lag.lag()).as("batches 0, 2, 3 and 4").isEqualTo(4);
            });
  }
}
