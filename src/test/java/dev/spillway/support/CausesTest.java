package dev.spillway.support;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.sql.SQLException;
import org.junit.jupiter.api.Test;

class CausesTest {
  @Test
  void should_walk_a_chain_that_loops_back_once_per_link() {
    RuntimeException outer = new RuntimeException("outer");
    IOException inner = new IOException("inner");
    outer.initCause(inner);
    inner.initCause(outer); // a library that wraps both ways

    assertThat(Causes.chain(outer)).containsExactly(outer, inner);
    assertThat(Causes.has(outer, SQLException.class)).isFalse();
    assertThat(Causes.root(outer)).isSameAs(inner);
  }

  @Test
  void should_find_the_outermost_match_and_the_first_message() {
    SQLException sql = new SQLException("connection refused", "08001");
    IllegalStateException wrapper = new IllegalStateException(null, sql);
    RuntimeException top = new RuntimeException(" ", wrapper);

    assertThat(Causes.has(top, SQLException.class)).isTrue();
    assertThat(Causes.first(top, IllegalStateException.class::isInstance)).containsSame(wrapper);
    assertThat(Causes.message(top)).isEqualTo("connection refused");
    assertThat(Causes.root(top)).isSameAs(sql);
    assertThat(Causes.message(new RuntimeException())).isNull();
  }
}
