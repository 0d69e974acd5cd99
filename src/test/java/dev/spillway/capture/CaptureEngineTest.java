package dev.spillway.capture;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.spillway.event.TableName;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Predicate;
import org.apache.kafka.clients.producer.MockProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** How tables are named to Debezium, and how captured changes are handed to Kafka. */
class CaptureEngineTest {
  private static final List<ProducerRecord<byte[], byte[]>> CHANGES =
      List.of(
          new ProducerRecord<>("t.events", "1".getBytes(), "a".getBytes()),
          new ProducerRecord<>("t.events", "2".getBytes(), "b".getBytes()));

  /** Debezium's refusal to close an engine whose tasks are starting. */
  private static final IllegalStateException STARTING =
      new IllegalStateException(
          "Cannot stop engine while tasks are starting, this may lead to leaked resource. Wait for"
              + " the tasks to be fully started.");

  @Test
  void should_close_an_engine_once_its_tasks_have_started() throws Exception {
    AtomicInteger asked = new AtomicInteger();
    CaptureEngine.closeOnceTasksStarted(
        () -> {
          if (asked.incrementAndGet() < 3) {
            throw STARTING;
          }
        },
        () -> false,
        Duration.ofSeconds(30),
        Duration.ofMillis(1));
    assertThat(asked).as("refused twice, then closed").hasValue(3);
  }

  @Test
  void should_stop_asking_an_engine_that_ended_on_its_own_or_refuses_past_the_wait() {
    AtomicInteger asked = new AtomicInteger();
    AtomicBoolean ended = new AtomicBoolean();
    assertThat(
            CompletableFuture.runAsync(
                () -> {
                  try {
                    CaptureEngine.closeOnceTasksStarted(
                        () -> {
                          if (asked.incrementAndGet() == 2) {
                            ended.set(true); // its start failed meanwhile
                          }
                          throw STARTING;
                        },
                        ended::get,
                        Duration.ofSeconds(30),
                        Duration.ofMillis(1));
                  } catch (Exception e) {
                    throw new IllegalStateException(e);
                  }
                }))
        .succeedsWithin(Duration.ofSeconds(10));
    assertThat(asked).hasValue(2);

    assertThatThrownBy(
            () ->
                CaptureEngine.closeOnceTasksStarted(
                    () -> {
                      throw STARTING;
                    },
                    () -> false,
                    Duration.ZERO,
                    Duration.ofMillis(1)))
        .isSameAs(STARTING);
    IllegalStateException other = new IllegalStateException("Engine is not running");
    assertThatThrownBy(
            () ->
                CaptureEngine.closeOnceTasksStarted(
                    () -> {
                      throw other;
                    },
                    () -> false,
                    Duration.ofSeconds(30),
                    Duration.ofMillis(1)))
        .as("any other failure at once")
        .isSameAs(other);
  }

  @Test
  void should_send_changes_again_while_kafka_cannot_take_them_until_it_does() throws Exception {
    AtomicInteger attempts = new AtomicInteger();
    MockProducer<byte[], byte[]> producer =
        refusing(r -> r.key()[0] == '1' && attempts.incrementAndGet() <= 3);

    boolean interrupted = handOver(producer, new CaptureStats(null), false);

    assertThat(interrupted).isFalse();
    assertThat(attempts).as("three refusals, then taken").hasValue(4);
    assertThat(producer.history()).extracting(r -> new String(r.key())).containsExactly("1", "2");
  }

  @Test
  void should_send_a_refused_batch_again_only_once_every_send_of_it_has_ended() throws Exception {
    MockProducer<byte[], byte[]> producer =
        new MockProducer<>(false, null, new ByteArraySerializer(), new ByteArraySerializer());
    CompletableFuture<Boolean> handedOver =
        CompletableFuture.supplyAsync(
            () -> {
              try {
                return handOver(producer, new CaptureStats(null), false);
              } catch (InterruptedException e) {
                throw new IllegalStateException(e);
              }
            });
    await().atMost(Duration.ofSeconds(10)).until(() -> producer.history().size() == 2);

    producer.errorNext(new TimeoutException("Expiring 1 record(s): 120000 ms has passed"));
    await()
        .during(Duration.ofMillis(300)) // thirty times the wait before sending again
        .atMost(Duration.ofSeconds(5))
        .alias("not sent again while the second send of the attempt is under way")
        .until(() -> producer.history().size() == 2);

    assertThat(producer.completeNext()).isTrue();
    await().atMost(Duration.ofSeconds(10)).until(() -> producer.history().size() == 4);
    assertThat(producer.completeNext()).isTrue();
    assertThat(producer.completeNext()).isTrue();
    assertThat(handedOver.get(10, TimeUnit.SECONDS)).isFalse();
  }

  @Test
  void should_stop_at_once_when_capture_stops_while_a_send_then_fails() throws Exception {
    MockProducer<byte[], byte[]> producer =
        new MockProducer<>(false, null, new ByteArraySerializer(), new ByteArraySerializer());
    CompletableFuture<Throwable> ended = new CompletableFuture<>();
    Thread sending =
        new Thread(
            () -> {
              try {
                handOver(producer, new CaptureStats(null), false);
                ended.complete(null);
              } catch (Throwable t) {
                ended.complete(t);
              }
            });
    sending.start();
    await().atMost(Duration.ofSeconds(10)).until(() -> producer.history().size() == 2);

    sending.interrupt(); // the engine closing while the sends are waited for
    producer.errorNext(new TimeoutException("Expiring 1 record(s): 120000 ms has passed"));
    producer.completeNext();

    assertThat(ended.get(10, TimeUnit.SECONDS))
        .as("the stop ends the hand-over; the batch is not sent again")
        .isInstanceOf(InterruptedException.class);
    assertThat(producer.history()).hasSize(2);
  }

  @Test
  void should_fail_the_batch_when_kafka_refuses_it_for_good() {
    MockProducer<byte[], byte[]> producer =
        new MockProducer<>(true, null, new ByteArraySerializer(), new ByteArraySerializer());
    producer.sendException = new RecordTooLargeException("The message is 2000000 bytes");

    assertThatThrownBy(() -> handOver(producer, new CaptureStats(null), false))
        .isInstanceOf(IllegalStateException.class)
        .hasMessage(
            "Kafka refused 2 captured changes of database main: The message is 2000000 bytes");
  }

  @Test
  void should_take_a_send_failing_as_capture_stops_for_the_stop_not_a_refusal() {
    MockProducer<byte[], byte[]> producer =
        new MockProducer<>(true, null, new ByteArraySerializer(), new ByteArraySerializer());
    producer.sendException = new KafkaException("Producer is closed forcefully.");

    assertThatThrownBy(() -> handOver(producer, new CaptureStats(null), true))
        .isInstanceOf(InterruptedException.class);
  }

  @Test
  void should_stop_sending_again_when_capture_is_stopping_and_leave_no_wait_behind() {
    MockProducer<byte[], byte[]> producer =
        new MockProducer<>(true, null, new ByteArraySerializer(), new ByteArraySerializer());
    producer.sendException = new TimeoutException("Topic t.events not present in metadata");
    CaptureStats stats = new CaptureStats(null);

    assertThatThrownBy(() -> handOver(producer, stats, true))
        .isInstanceOf(InterruptedException.class);
    assertThat(stats.wait("main", Duration.ZERO)).isEmpty();
  }

  @Test
  void should_say_since_when_a_batch_waits_for_kafka_and_why_until_it_is_taken() throws Exception {
    AtomicBoolean kafkaBack = new AtomicBoolean();
    MockProducer<byte[], byte[]> producer = refusing(r -> !kafkaBack.get());
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    CaptureStats stats = new CaptureStats(registry);
    Instant before = Instant.now();
    CompletableFuture<Boolean> handedOver =
        CompletableFuture.supplyAsync(
            () -> {
              try {
                return handOver(producer, stats, false);
              } catch (InterruptedException e) {
                throw new IllegalStateException(e);
              }
            });

    await()
        .atMost(Duration.ofSeconds(10))
        .untilAsserted(
            () -> assertThat(waitSeconds(registry)).as("the gauge counts on").isGreaterThan(0.05));
    assertThat(stats.wait("main", Duration.ZERO))
        .hasValueSatisfying(
            w -> {
              assertThat(w.database()).isEqualTo("main");
              assertThat(w.since()).isBetween(before, Instant.now());
              assertThat(w.reason())
                  .isEqualTo("Topic t.events not present in metadata after 3000 ms.");
            });
    assertThat(stats.wait("main", Duration.ofMinutes(1))).as("not that long").isEmpty();
    kafkaBack.set(true);

    assertThat(handedOver.get(10, TimeUnit.SECONDS)).isFalse();
    assertThat(stats.wait("main", Duration.ZERO)).isEmpty();
    assertThat(waitSeconds(registry)).isZero();
  }

  private static double waitSeconds(SimpleMeterRegistry registry) {
    return registry
        .get("spillway_capture_kafka_wait_seconds")
        .tag("database", "main")
        .gauge()
        .value();
  }

  /** A producer that takes every record at once, but those {@code refused} says it refuses. */
  private static MockProducer<byte[], byte[]> refusing(
      Predicate<ProducerRecord<byte[], byte[]>> refused) {
    return new MockProducer<>(true, null, new ByteArraySerializer(), new ByteArraySerializer()) {
      @Override
      public synchronized Future<RecordMetadata> send(ProducerRecord<byte[], byte[]> r) {
        if (refused.test(r)) {
          throw new TimeoutException("Topic t.events not present in metadata after 3000 ms.");
        }
        return super.send(r);
      }
    };
  }

  /** Hands {@link #CHANGES} of database main over, sending again every 10 ms. */
  private static boolean handOver(
      MockProducer<byte[], byte[]> producer, CaptureStats stats, boolean interrupted)
      throws InterruptedException {
    return CaptureEngine.handOver(
        producer,
        CHANGES,
        stats.handOver("main", Clock.systemUTC()),
        Duration.ofMillis(10),
        interrupted);
  }

  @ParameterizedTest
  @ValueSource(strings = {"Events+EU", "a,b", "audit$events", "events"})
  void should_name_a_table_for_a_snapshot_as_a_literal_pattern(String table) {
    String name = CaptureEngine.snapshotName(new TableName("app", table));

    assertThat("app." + table).matches(name);
    assertThat("app." + table + "x").doesNotMatch(name);
  }

  @ParameterizedTest
  @ValueSource(strings = {"x.y", "my events", "say\"hi\"", "it's", "back`tick"})
  void should_refuse_a_name_debezium_would_read_back_as_another_table(String table) {
    assertThatThrownBy(() -> CaptureEngine.snapshotName(new TableName("app", table)))
        .isInstanceOf(CaptureSetupException.class)
        .hasMessageStartingWith("Table app." + table + " holds rows from before capture");
  }

  @Test
  void should_hand_debezium_the_urls_tls_settings() {
    java.util.function.Function<String, Map<String, String>> tls =
        url ->
            CaptureEngine.tlsSettings(
                org.postgresql.Driver.parseURL(url, new java.util.Properties()));

    assertThat(
            tls.apply(
                "jdbc:postgresql://db/app?ssl=true&sslfactory=org.postgresql.ssl.NonValidatingFactory"))
        .containsExactlyInAnyOrderEntriesOf(
            Map.of(
                "database.sslmode", "verify-full",
                "database.sslfactory", "org.postgresql.ssl.NonValidatingFactory"));
    assertThat(
            tls.apply(
                "jdbc:postgresql://db/app?sslmode=verify-ca&sslrootcert=/etc/pg/root.crt&ssl=true"))
        .containsExactlyInAnyOrderEntriesOf(
            Map.of("database.sslmode", "verify-ca", "database.sslrootcert", "/etc/pg/root.crt"));
    assertThat(tls.apply("jdbc:postgresql://db/app?ssl"))
        .containsEntry("database.sslmode", "verify-full");
    // As the driver takes them: not true, so its default (prefer), which Debezium's is too.
    assertThat(tls.apply("jdbc:postgresql://db/app?ssl=1")).isEmpty();
    assertThat(tls.apply("jdbc:postgresql://db/app?ssl=false&tcpKeepAlive=true")).isEmpty();
  }

  private static final org.apache.kafka.connect.data.Schema ENVELOPE =
      org.apache.kafka.connect.data.SchemaBuilder.struct()
          .field("op", org.apache.kafka.connect.data.Schema.STRING_SCHEMA)
          .build();

  /** A change of kind {@code op} Debezium stores at {@code position}. */
  private static io.debezium.engine.RecordChangeEvent<org.apache.kafka.connect.source.SourceRecord>
      change(String op, long position) {
    org.apache.kafka.connect.source.SourceRecord record =
        new org.apache.kafka.connect.source.SourceRecord(
            Map.of("server", "spillway-main"),
            Map.of("lsn", position, "lsn_proc", position, "lsn_commit", 1L),
            "spillway-main.public.events",
            ENVELOPE,
            new org.apache.kafka.connect.data.Struct(ENVELOPE).put("op", op));
    return () -> record;
  }

  /** A heartbeat, no change envelope, at {@code position}. */
  private static io.debezium.engine.RecordChangeEvent<org.apache.kafka.connect.source.SourceRecord>
      heartbeat(long position) {
    org.apache.kafka.connect.source.SourceRecord record =
        new org.apache.kafka.connect.source.SourceRecord(
            Map.of("server", "spillway-main"),
            Map.of("lsn", position, "lsn_proc", position),
            "__debezium-heartbeat.spillway-main",
            null,
            null);
    return () -> record;
  }

  /** As capture acknowledges a batch whose every change went to Kafka. */
  private static int acknowledged(
      List<io.debezium.engine.RecordChangeEvent<org.apache.kafka.connect.source.SourceRecord>>
          batch) {
    return CaptureEngine.acknowledgeable(batch, i -> true, null);
  }

  @Test
  void should_acknowledge_nothing_more_at_the_position_left_until_a_change_at_another_comes() {
    assertThat(CaptureEngine.acknowledgeable(List.of(heartbeat(200)), i -> true, 200L))
        .as("a heartbeat while the stream is slow, at the rows' position")
        .isZero();
    assertThat(
            CaptureEngine.acknowledgeable(
                List.of(heartbeat(200), change("c", 300), change("d", 310)), i -> true, 200L))
        .as("every row at 200 came before the change at 300")
        .isEqualTo(3);
  }

  @Test
  void should_acknowledge_the_inserts_at_one_position_that_went_nowhere() {
    assertThat(
            CaptureEngine.acknowledgeable(
                List.of(change("c", 100), change("c", 200), change("c", 200)), i -> i == 0, null))
        .as("a page of a table capture publishes nothing of: none of it can be lost")
        .isEqualTo(3);
  }

  @Test
  void should_acknowledge_every_change_of_a_batch_each_at_a_position_of_its_own() {
    assertThat(
            acknowledged(
                List.of(change("c", 100), change("d", 110), change("c", 120), change("d", 130))))
        .isEqualTo(4);
    assertThat(acknowledged(List.of())).isZero();
  }

  @Test
  void should_leave_the_inserts_sharing_the_last_position_to_a_later_batch() {
    assertThat(
            acknowledged(
                List.of(change("c", 100), change("c", 200), change("c", 200), change("c", 200))))
        .as("the rows of a COPY's page at its end")
        .isEqualTo(1);
    assertThat(acknowledged(List.of(change("d", 100), change("c", 200))))
        .as("one insert last: it may be a page's first row")
        .isEqualTo(1);
    assertThat(acknowledged(List.of(change("c", 200), change("c", 200))))
        .as("a batch within one page")
        .isZero();
    assertThat(
            acknowledged(
                List.of(change("c", 100), change("c", 200), change("c", 200), heartbeat(200))))
        .as("a heartbeat after them, at their position")
        .isEqualTo(1);
    assertThat(acknowledged(List.of(change("c", 100), change("d", 120))))
        .as("a delete last: no other change shares its position")
        .isEqualTo(2);
  }
}
