package dev.spillway.buffers;

import static org.assertj.core.api.Assertions.assertThat;

import dev.spillway.event.BufferEvent;
import dev.spillway.event.EventSerdes;
import dev.spillway.event.InsertIdentity;
import dev.spillway.event.TableName;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.processor.api.MockProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class PassOverRepeatsTest {
  private static final TableName TABLE = new TableName("public", "events");

  private final MockProcessorContext<String, byte[]> context = new MockProcessorContext<>();
  private final AtomicInteger passedOver = new AtomicInteger();
  private KeyValueStore<Long, byte[]> store;

  @BeforeEach
  void setUp() {
    store =
        Stores.keyValueStoreBuilder(
                Stores.inMemoryKeyValueStore("seen"), Serdes.Long(), Serdes.ByteArray())
            .withLoggingDisabled()
            .build();
    store.init(context.getStateStoreContext(), store);
    context.addStateStore(store);
  }

  private PassOverRepeats started(int window, Duration age) {
    PassOverRepeats p = new PassOverRepeats("seen", window, age, passedOver::incrementAndGet);
    p.init(context);
    return p;
  }

  /** Row {@code id} inserted at LSN {@code 100 * id}, committed {@code commitSeconds} in. */
  private static void insert(PassOverRepeats p, long id, long commitSeconds) {
    BufferEvent e =
        new BufferEvent("main", TABLE, Map.of("id", id), commitSeconds * 1_000_000, 100 * id, 1, 9);
    p.process(new Record<>(TABLE.toString(), EventSerdes.encode(e), 0));
  }

  private List<Object> forwardedIds() {
    return context.forwarded().stream()
        .map(f -> EventSerdes.decodeBufferEvent(f.record().value()).row().get("id"))
        .toList();
  }

  @Test
  void should_remember_what_went_through_when_started_again_from_its_store() {
    PassOverRepeats before = started(1_000, Duration.ofMinutes(10));
    for (long id = 1; id <= 250; id++) { // eight chunks, the last open
      insert(before, id, id);
    }
    context.resetForwards();

    PassOverRepeats after = started(1_000, Duration.ofMinutes(10)); // the task elsewhere
    insert(after, 1, 1);
    insert(after, 250, 250);
    insert(after, 251, 251);
    insert(after, 251, 251);
    assertThat(forwardedIds()).containsExactly(251L);
    assertThat(passedOver).hasValue(3);
  }

  @Test
  void should_keep_no_more_than_its_window_of_what_a_store_brings_back() {
    PassOverRepeats wide = started(1_000, Duration.ofMinutes(10));
    for (long id = 1; id <= 500; id++) {
      insert(wide, id, id);
    }
    context.resetForwards();

    PassOverRepeats narrow = started(PassOverRepeats.CHUNK * 3, Duration.ofMinutes(10));
    assertThat(storeEntries()).as("chunks left in the store").isEqualTo(4);
    long kept = 500 - PassOverRepeats.CHUNK * 3 + 1;
    insert(narrow, kept, kept); // remembered
    insert(narrow, 1, 1); // forgotten, so it goes through again
    assertThat(forwardedIds()).containsExactly(1L);
  }

  @Test
  void should_take_what_it_remembers_from_the_store_when_the_same_instance_starts_again() {
    PassOverRepeats p = started(1_000, Duration.ofMinutes(10));
    insert(p, 1, 1);
    insert(p, 2, 2);
    // A transaction aborted: the store is back to before 2 went through, and Streams initializes
    // the same instance again, to process 2 again.
    store.put(0L, Arrays.copyOf(store.get(0L), InsertIdentity.BYTES));
    p.init(context);
    context.resetForwards();
    insert(p, 2, 2);
    insert(p, 1, 1);
    assertThat(forwardedIds()).containsExactly(2L);
    assertThat(passedOver).hasValue(1);
  }

  @Test
  void should_forget_the_oldest_beyond_its_window() {
    PassOverRepeats p = started(PassOverRepeats.CHUNK * 2, Duration.ofMinutes(10));
    for (long id = 1; id <= PassOverRepeats.CHUNK * 3L; id++) {
      insert(p, id, 1);
    }
    context.resetForwards();
    insert(p, 1, 1); // its chunk forgotten: goes through again
    insert(p, PassOverRepeats.CHUNK + 1, 1); // remembered
    assertThat(forwardedIds()).containsExactly(1L);
    assertThat(passedOver).hasValue(1);
    assertThat(storeEntries()).as("chunks kept").isEqualTo(3);
  }

  @Test
  void should_forget_what_was_committed_long_before_the_latest() {
    PassOverRepeats p = started(1_000, Duration.ofMinutes(10));
    for (long id = 1; id <= PassOverRepeats.CHUNK; id++) {
      insert(p, id, 0);
    }
    insert(p, 1_000, 601); // more than ten minutes later
    context.resetForwards();
    insert(p, 1, 0);
    insert(p, 1_000, 601);
    assertThat(forwardedIds()).containsExactly(1L);
    assertThat(storeEntries()).isEqualTo(1);
  }

  private int storeEntries() {
    int n = 0;
    try (var it = store.all()) {
      for (; it.hasNext(); it.next()) {
        n++;
      }
    }
    return n;
  }
}
