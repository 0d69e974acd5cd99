package dev.spillway.buffers;

import static org.assertj.core.api.Assertions.assertThat;

import dev.spillway.event.TableName;
import dev.spillway.sink.SinkHeaders;
import dev.spillway.sink.SinkRecord;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.Supplier;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class RunningBufferTest {
  private static final TableName TABLE = TableName.parse("events");
  private static final BulkHandler.Batch BATCH =
      new BulkHandler.Batch("events", "g-1", 1, "id", List.of(Map.of("id", 1)));

  private static RunningBuffer buffer(BulkHandler handler) {
    BufferSettings s = BufferSettings.of("events", TABLE, "main", new HandlerSpec.Sql(":ids"));
    return new RunningBuffer(
        s,
        new BufferTable(TABLE, "id", "int8", List.of("id"), Optional.empty()),
        handler,
        new BufferMetrics(new SimpleMeterRegistry(), s.name(), () -> 0));
  }

  private static BulkHandler throwing(Supplier<Throwable> thrown) {
    return batch -> {
      Throwable t = thrown.get();
      if (t instanceof Error e) {
        throw e;
      }
      throw (RuntimeException) t;
    };
  }

  @ParameterizedTest
  @ValueSource(strings = {"exception", "missing class", "assertion", "recursion"})
  void should_count_what_a_handler_throws_as_a_retry_with_its_reason(String kind) throws Exception {
    Supplier<Throwable> thrown =
        switch (kind) {
          case "exception" -> () -> new IllegalStateException("receiver said no");
          case "missing class" -> () -> new NoClassDefFoundError("com/example/Missing");
          case "assertion" -> () -> new AssertionError("unexpected row");
          default -> () -> new StackOverflowError("deep");
        };
    String name = thrown.get().getClass().getSimpleName();

    BulkHandler.Result r = buffer(throwing(thrown)).call(BATCH, () -> {});

    assertThat(r).isInstanceOf(BulkHandler.Result.Retry.class);
    assertThat(((BulkHandler.Result.Retry) r).reason())
        .isEqualTo("handler failed: " + name + ": " + thrown.get().getMessage());
  }

  @Test
  void should_remember_the_retries_of_a_bounded_number_of_batches_until_they_settle() {
    RunningBuffer b = buffer(batch -> BulkHandler.Result.success());
    for (int i = 0; i <= RunningBuffer.RETRYING_KEPT; i++) {
      b.retrying("g-" + i, new RunningBuffer.Retrying(1, 0));
    }
    long kept =
        IntStream.rangeClosed(0, RunningBuffer.RETRYING_KEPT)
            .filter(i -> b.retrying("g-" + i).isPresent())
            .count();
    assertThat(kept).isEqualTo(RunningBuffer.RETRYING_KEPT);
    String last = "g-" + RunningBuffer.RETRYING_KEPT;
    assertThat(b.retrying(last)).contains(new RunningBuffer.Retrying(1, 0));

    b.retrying(last, new RunningBuffer.Retrying(2, 5));
    assertThat(b.retrying(last)).contains(new RunningBuffer.Retrying(2, 5));
    b.settled(last);
    assertThat(b.retrying(last)).isEmpty();
  }

  @Test
  void should_remember_a_replay_apart_from_the_batch_it_replays() {
    SinkRecord batch =
        new SinkRecord("t.batches", 0, 7, "g-1".getBytes(), new byte[0], 0, Map.of());
    SinkRecord replay =
        new SinkRecord(
            "t.batches",
            0,
            9,
            "g-1".getBytes(),
            new byte[0],
            0,
            Map.of(SinkHeaders.REPLAYED_FROM, SinkHeaders.text("t.dlq-0@3")));

    assertThat(BufferBatchHandler.retryKey(batch)).isEqualTo("g-1");
    assertThat(BufferBatchHandler.retryKey(replay)).isNotEqualTo("g-1").startsWith("g-1");
    assertThat(
            BufferBatchHandler.retryKey(
                new SinkRecord("t.batches", 0, 7, null, new byte[0], 0, Map.of())))
        .as("keyless records apart")
        .isNotEqualTo(
            BufferBatchHandler.retryKey(
                new SinkRecord("t.batches", 0, 8, null, new byte[0], 0, Map.of())));
  }
}
