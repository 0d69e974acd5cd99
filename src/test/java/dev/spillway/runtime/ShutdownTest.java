package dev.spillway.runtime;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayDeque;
import java.util.Deque;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class ShutdownTest {
  private final List<String> closed = new CopyOnWriteArrayList<>();

  /** A part that closes at once. */
  private final class Part implements AutoCloseable {
    private final String name;

    Part(String name) {
      this.name = name;
    }

    @Override
    public void close() {
      closed.add(name);
    }
  }

  /**
   * A part of a kind that closes together, which ends its close once both of its kind close, then
   * throws {@code error} when there is one.
   */
  private final class Slow implements AutoCloseable {
    private final String name;
    private final CountDownLatch closing;
    private final Error error;

    Slow(String name, CountDownLatch closing) {
      this(name, closing, null);
    }

    Slow(String name, CountDownLatch closing, Error error) {
      this.name = name;
      this.closing = closing;
      this.error = error;
    }

    @Override
    public void close() throws InterruptedException {
      closing.countDown();
      boolean together = closing.await(10, TimeUnit.SECONDS);
      closed.add(name + (together ? "" : " alone"));
      if (error != null) {
        throw error;
      }
    }
  }

  @Test
  void should_close_the_last_started_first_and_parts_of_a_kind_together_at_the_first() {
    CountDownLatch closing = new CountDownLatch(2);
    Deque<AutoCloseable> started = new ArrayDeque<>();
    started.push(new Part("kafka"));
    started.push(new Slow("streams-lfk", closing));
    started.push(new Part("handler"));
    started.push(new Slow("streams-buffer", closing));
    started.push(new Part("capture"));

    Shutdown.inReverse(started, Set.of(Slow.class));

    assertThat(started).isEmpty();
    assertThat(closed.get(0)).isEqualTo("capture");
    assertThat(closed.subList(1, 3)).containsExactlyInAnyOrder("streams-buffer", "streams-lfk");
    assertThat(closed.subList(3, 5)).containsExactly("handler", "kafka");
  }

  @Test
  void should_go_on_closing_after_a_part_fails_to() {
    Deque<AutoCloseable> started = new ArrayDeque<>();
    started.push(new Part("kafka"));
    started.push(
        () -> {
          throw new IllegalStateException("broken");
        });

    Shutdown.inReverse(started, Set.of());

    assertThat(closed).containsExactly("kafka");
  }

  @Test
  void should_stop_every_part_before_throwing_the_error_one_ended_with() {
    CountDownLatch closing = new CountDownLatch(2);
    Deque<AutoCloseable> started = new ArrayDeque<>();
    started.push(new Part("postgres"));
    started.push(new Slow("streams-lfk", closing));
    started.push(new Slow("streams-buffer", closing, new OutOfMemoryError("Java heap space")));
    started.push(
        () -> {
          throw new AssertionError("a class that no longer loads");
        });

    assertThatThrownBy(() -> Shutdown.inReverse(started, Set.of(Slow.class)))
        .isInstanceOf(AssertionError.class)
        .hasMessage("a class that no longer loads")
        .satisfies(
            e -> assertThat(e.getSuppressed()).hasExactlyElementsOfTypes(OutOfMemoryError.class));
    assertThat(closed.subList(0, 2)).containsExactlyInAnyOrder("streams-buffer", "streams-lfk");
    assertThat(closed.subList(2, closed.size())).containsExactly("postgres");
  }
}
