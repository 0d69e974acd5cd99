package dev.spillway.buffers;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.spillway.event.InsertIdentity;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.Test;

class IdentityWindowTest {
  @Test
  void should_hold_what_a_queue_and_a_set_would_through_adds_and_removals() {
    Random random = new Random(11);
    // Past IdentityWindow.INITIAL_ROOM too, so that it grows while its ring has wrapped.
    for (int capacity : new int[] {1, 2, 5, 17, 64, 1_000, 3_000}) {
      IdentityWindow window = new IdentityWindow(capacity);
      ArrayDeque<InsertIdentity> queue = new ArrayDeque<>();
      Set<InsertIdentity> held = new HashSet<>();
      List<InsertIdentity> ever = new ArrayList<>();
      int most = 0;
      for (int step = 0; step < 30_000; step++) {
        if (queue.size() < capacity && random.nextInt(3) > 0) {
          // Few distinct values, so that identities often share fields and home slots.
          InsertIdentity id =
              new InsertIdentity(
                  random.nextInt(Math.max(50, capacity)), random.nextInt(3), random.nextInt(4));
          if (held.add(id)) {
            window.add(id);
            queue.add(id);
            ever.add(id);
          }
        } else {
          int n = random.nextInt(3);
          window.removeOldest(n);
          for (int k = 0; k < n && !queue.isEmpty(); k++) {
            held.remove(queue.removeFirst());
          }
        }
        assertThat(window.size()).isEqualTo(queue.size());
        most = Math.max(most, queue.size());
        InsertIdentity probe = ever.isEmpty() ? null : ever.get(random.nextInt(ever.size()));
        if (probe != null) {
          assertThat(window.contains(probe))
              .as("%s at step %d", probe, step)
              .isEqualTo(held.contains(probe));
        }
      }
      for (InsertIdentity id : ever) {
        assertThat(window.contains(id)).isEqualTo(held.contains(id));
      }
      assertThat(most).as("filled at capacity %d", capacity).isEqualTo(capacity);
      ByteBuffer bytes = ByteBuffer.wrap(window.bytes(window.next() - queue.size(), queue.size()));
      for (InsertIdentity id : queue) {
        assertThat(InsertIdentity.readFrom(bytes)).isEqualTo(id);
      }
    }
  }

  @Test
  void should_refuse_more_than_its_capacity_and_identities_it_no_longer_holds() {
    IdentityWindow window = new IdentityWindow(2);
    window.add(new InsertIdentity(1, 1, 1));
    window.add(new InsertIdentity(2, 2, 2));
    assertThatThrownBy(() -> window.add(new InsertIdentity(3, 3, 3)))
        .isInstanceOf(IllegalStateException.class);
    window.removeOldest(1);
    assertThatThrownBy(() -> window.bytes(0, 1)).isInstanceOf(IllegalArgumentException.class);
    assertThat(window.bytes(1, 1)).hasSize(InsertIdentity.BYTES);
  }
}
