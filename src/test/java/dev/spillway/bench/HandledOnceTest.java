package dev.spillway.bench;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class HandledOnceTest {

  @Test
  void should_be_met_when_every_inserted_row_was_handled_and_none_dead_lettered() {
    HandledOnce h = new HandledOnce(500, 500, 0, 0);

    assertThat(h.met()).isTrue();
    assertThat(h.line("Spillway"))
        .isEqualTo("every inserted row handled once by Spillway: met (inserted 500, handled 500)");
  }

  @Test
  void should_not_be_met_when_rows_were_lost() {
    HandledOnce h = new HandledOnce(500, 499, 0, 0);

    assertThat(h.met()).isFalse();
    assertThat(h.line("the SKIP LOCKED poller"))
        .isEqualTo(
            "every inserted row handled once by the SKIP LOCKED poller: NOT met (inserted 500,"
                + " handled 499)");
  }

  @Test
  void should_not_be_met_when_rows_were_handled_twice() {
    assertThat(new HandledOnce(500, 501, 0, 0).met()).isFalse();
  }

  @Test
  void should_not_be_met_when_a_row_lost_stays_in_the_table_though_another_was_handled_twice() {
    HandledOnce h = new HandledOnce(500, 500, 0, 1);

    assertThat(h.met()).isFalse();
    assertThat(h.line("Spillway"))
        .isEqualTo(
            "every inserted row handled once by Spillway: NOT met (inserted 500, handled 500,"
                + " left in the table 1)");
  }

  @Test
  void should_not_be_met_when_rows_were_dead_lettered_and_say_how_many() {
    HandledOnce h = new HandledOnce(500, 500, 3, 0);

    assertThat(h.met()).isFalse();
    assertThat(h.line("Spillway"))
        .isEqualTo(
            "every inserted row handled once by Spillway: NOT met (inserted 500, handled 500,"
                + " dead-lettered 3)");
  }

  @Test
  void should_wait_for_a_count_that_catches_up_with_the_inserts() throws InterruptedException {
    java.util.concurrent.atomic.AtomicLong reads = new java.util.concurrent.atomic.AtomicLong();
    // The last batch is counted at the third look.
    long counted =
        HandledOnce.countedBy(
            () -> reads.incrementAndGet() < 3 ? 400 : 500, 500, java.time.Duration.ofSeconds(30));

    assertThat(counted).isEqualTo(500);
    assertThat(reads).hasValue(3);
  }

  @Test
  void should_give_the_count_as_it_stands_once_the_wait_is_over() throws InterruptedException {
    assertThat(HandledOnce.countedBy(() -> 499, 500, java.time.Duration.ofMillis(30)))
        .isEqualTo(499);
  }
}
