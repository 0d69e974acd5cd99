package dev.spillway.event;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import dev.spillway.testing.EmbeddedInfra;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;

/** Reading a topic's range on the shared embedded Kafka. */
class TopicRangeIT {
  private String bootstrap;
  private String topic;
  private KafkaProducer<byte[], byte[]> producer;

  @BeforeEach
  void topic() throws Exception {
    bootstrap = EmbeddedInfra.get().bootstrapServers();
    topic = "range-" + UUID.randomUUID().toString().substring(0, 8);
    try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
      admin.createTopics(List.of(new NewTopic(topic, 3, (short) 1))).all().get();
    }
    producer =
        new KafkaProducer<>(
            Map.of("bootstrap.servers", bootstrap),
            new ByteArraySerializer(),
            new ByteArraySerializer());
  }

  @AfterEach
  void close() {
    producer.close();
  }

  private void write(int partition, String value) throws InterruptedException {
    try {
      producer.send(new ProducerRecord<>(topic, partition, null, value.getBytes())).get();
    } catch (ExecutionException e) {
      throw new IllegalStateException(e.getCause());
    }
  }

  @Test
  void should_read_in_order_up_to_the_ends_every_partition_had_when_the_read_began()
      throws Exception {
    write(2, "c");
    write(1, "b");
    write(0, "a");
    write(2, "d");
    List<String> read = new ArrayList<>();

    try (TopicRange range = TopicRange.open(bootstrap, Map.of())) {
      range.readInOrder(
          topic,
          TopicRange.all(),
          r -> {
            read.add(r.partition() + ":" + new String(r.value()));
            // Written to a partition not read yet: past the end it had when the read began.
            if (r.partition() == 0) {
              write(1, "late");
              write(2, "late");
            }
          });
    }

    assertThat(read).containsExactly("0:a", "1:b", "2:c", "2:d");
  }

  @Test
  void should_read_from_a_time_without_the_client_warning_about_partitions_not_assigned()
      throws Exception {
    long t = System.currentTimeMillis();
    writeAt(0, t - 60_000, "old");
    writeAt(0, t, "new");
    writeAt(1, t - 60_000, "old"); // nothing at or after t: partition 1 is not read
    Logger kafka = (Logger) LoggerFactory.getLogger("org.apache.kafka");
    ListAppender<ILoggingEvent> logged = new ListAppender<>();
    logged.start();
    kafka.addAppender(logged);
    List<String> read = new ArrayList<>();

    try (TopicRange range = TopicRange.open(bootstrap, Map.of())) {
      range.readInOrder(topic, range.writtenFrom(Instant.ofEpochMilli(t)), r -> add(read, r));
      range.readInOrder(topic, TopicRange.all(), r -> add(read, r));
    } finally {
      kafka.detachAppender(logged);
    }

    assertThat(read).containsExactly("0:new", "0:old", "0:new", "1:old");
    assertThat(logged.list)
        .filteredOn(e -> e.getLevel().isGreaterOrEqual(Level.WARN))
        .extracting(ILoggingEvent::getFormattedMessage)
        .isEmpty();
  }

  private void writeAt(int partition, long timestamp, String value) throws Exception {
    producer.send(new ProducerRecord<>(topic, partition, timestamp, null, value.getBytes())).get();
  }

  /** A record as partition:value. */
  private static void add(List<String> read, ConsumerRecord<byte[], byte[]> r) {
    read.add(r.partition() + ":" + new String(r.value()));
  }

  @Test
  void should_read_every_record_after_a_group_that_never_committed() throws Exception {
    write(0, "a");
    write(1, "b");
    List<String> read = new ArrayList<>();

    try (TopicRange range = TopicRange.open(bootstrap, Map.of())) {
      range.readInOrder(topic, range.afterCommitted("never-" + topic), r -> add(read, r));
    }

    assertThat(read).containsExactly("0:a", "1:b");
  }

  @Test
  void should_refuse_to_read_after_a_group_whose_positions_kafka_did_not_give() throws Exception {
    List<TopicPartition> partitions = List.of(new TopicPartition(topic, 0));
    // No answer can come within a millisecond: the admin client times the request out.
    try (TopicRange range =
        TopicRange.open(
            bootstrap, Map.of("default.api.timeout.ms", "1", "request.timeout.ms", "1"))) {
      assertThatThrownBy(() -> range.afterCommitted("slow-" + topic).positions(partitions))
          .isInstanceOf(KafkaException.class)
          .hasMessageStartingWith(
              "Could not read the positions consumer group slow-" + topic + " committed: ");
    }
  }

  @Test
  void should_give_up_naming_the_partitions_kafka_gave_nothing_of_for_the_clients_timeout()
      throws Exception {
    write(0, "a");
    write(1, "b");
    // Deleted once its ends are taken: nothing more comes of the partitions being read.
    TopicRange.Start deletedFirst =
        partitions -> {
          try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            admin.deleteTopics(List.of(topic)).all().get();
          } catch (ExecutionException e) {
            throw new IllegalStateException(e.getCause());
          }
          return Map.of();
        };
    List<String> read = new ArrayList<>();

    assertTimeoutPreemptively(
        Duration.ofSeconds(60),
        () -> {
          try (TopicRange range =
              TopicRange.open(
                  bootstrap,
                  Map.of("default.api.timeout.ms", "2000", "request.timeout.ms", "2000"))) {
            assertThatThrownBy(() -> range.read(topic, deletedFirst, r -> add(read, r)))
                .isInstanceOf(KafkaException.class)
                .hasMessage(
                    "Kafka gave nothing more of %s-0 at offset 0 of 1, %s-1 at offset 0 of 1 for"
                        + " 2 s (its leader may be down, or the topic deleted)",
                    topic, topic);
            assertThat(range.consumer().assignment()).isEmpty();
          }
        });
    assertThat(read).isEmpty();
  }

  @Test
  void should_read_up_to_the_end_a_read_committed_consumer_can_reach() throws Exception {
    write(0, "committed");
    try (KafkaProducer<byte[], byte[]> transactional =
        new KafkaProducer<>(
            Map.of("bootstrap.servers", bootstrap, "transactional.id", "range-" + topic),
            new ByteArraySerializer(),
            new ByteArraySerializer())) {
      transactional.initTransactions();
      transactional.beginTransaction();
      transactional.send(new ProducerRecord<>(topic, 0, null, "open".getBytes())).get();
      List<String> read = new ArrayList<>();

      // Left open: its record is past the end such a consumer reaches until it ends.
      assertTimeoutPreemptively(
          Duration.ofSeconds(60),
          () -> {
            try (TopicRange range = TopicRange.open(bootstrap, Map.of())) {
              range.readInOrder(topic, TopicRange.all(), r -> add(read, r));
            }
          });

      assertThat(read).containsExactly("0:committed");
      transactional.abortTransaction();
    }
  }
}
