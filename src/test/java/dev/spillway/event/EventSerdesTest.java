package dev.spillway.event;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.apache.kafka.common.errors.SerializationException;
import org.junit.jupiter.api.Test;

class EventSerdesTest {
  private static final TableName TABLE = new TableName("public", "contact_activity_events");

  @Test
  void should_build_a_batch_from_encoded_events_byte_for_byte_as_encoding_the_batch_does() {
    Random random = new Random(7);
    for (int size : new int[] {1, 2, 3, 64, 1000}) {
      List<BufferEvent> events = new ArrayList<>();
      for (int i = 0; i < size; i++) {
        events.add(event(random, i));
      }
      List<byte[]> encoded = events.stream().map(EventSerdes::encode).toList();

      EventSerdes.EncodedBatch spliced = EventSerdes.encodeBufferBatch("activity-é", encoded);

      BufferBatch batch = BufferBatch.of("activity-é", events);
      assertThat(spliced.groupId()).isEqualTo(batch.groupId());
      assertThat(spliced.bytes()).isEqualTo(EventSerdes.encode(batch));
      assertThat(EventSerdes.decodeBufferBatch(spliced.bytes()).events()).hasSize(size);
    }
  }

  @Test
  void should_refuse_to_batch_what_is_not_a_buffer_event() {
    byte[] event = EventSerdes.encode(event(new Random(1), 1));
    byte[] deleted =
        EventSerdes.encode(
            new DeletedRecord("main", TABLE, Map.of("id", 1L), 1_000_000L, 42L, 1_000L));
    byte[] truncated = Arrays.copyOf(event, event.length - 3);
    byte[] longer = Arrays.copyOf(event, event.length + 1);

    assertThatThrownBy(() -> EventSerdes.encodeBufferBatch("b", List.of(event, deleted)))
        .isInstanceOf(SerializationException.class)
        .hasMessageContaining("event 1 of the batch");
    assertThatThrownBy(() -> EventSerdes.encodeBufferBatch("b", List.of(truncated)))
        .isInstanceOf(SerializationException.class);
    assertThatThrownBy(() -> EventSerdes.encodeBufferBatch("b", List.of(longer)))
        .isInstanceOf(SerializationException.class)
        .hasMessageContaining("past its end");
    assertThatThrownBy(
            () ->
                EventSerdes.encodeBufferBatch(
                    "b", List.of("text".getBytes(StandardCharsets.UTF_8))))
        .isInstanceOf(SerializationException.class);
  }

  /** An event whose row holds every kind of value a column can carry, some of them null. */
  private static BufferEvent event(Random random, int i) {
    Map<String, Object> row = new LinkedHashMap<>();
    row.put("id", (long) i);
    row.put("contact_id", random.nextInt());
    row.put("activity", random.nextBoolean() ? "call" : "e-mail ✉ " + random.nextLong());
    row.put("score", random.nextDouble());
    row.put("ratio", random.nextFloat());
    row.put("flag", random.nextBoolean());
    row.put("note", random.nextInt(3) == 0 ? null : "n" + i);
    byte[] blob = new byte[random.nextInt(40)];
    random.nextBytes(blob);
    row.put("payload", blob);
    return new BufferEvent(
        "main",
        TABLE,
        row,
        1_700_000_000_000_000L + random.nextInt(1_000_000),
        0x1000_0000L + 64L * i,
        1_700_000_000_000L + i);
  }
}
