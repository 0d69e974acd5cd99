package dev.spillway.buffers;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import org.junit.jupiter.api.Test;

class SqlParametersTest {
  @Test
  void should_bind_each_parameter_in_the_order_written() {
    SqlParameters p =
        SqlParameters.parse(
            "INSERT INTO synced SELECT id, :group_id FROM t WHERE id = ANY(:ids) AND :ids <> '{}'");

    assertThat(p.sql())
        .isEqualTo("INSERT INTO synced SELECT id, ? FROM t WHERE id = ANY(?) AND ? <> '{}'");
    assertThat(p.names()).containsExactly("group_id", "ids", "ids");
  }

  @Test
  void should_leave_literals_quoted_names_comments_and_casts_alone() {
    String kept =
        "SELECT ':ids', E'it\\'s :ids', \":ids\", $$ :ids $$, $q$ :group_id $q$, x::ids,"
            + " :idsx /* :ids /* nested :ids */ :ids */ FROM t -- keyed by :ids\n"
            + "WHERE id = ANY(:ids)";

    SqlParameters p = SqlParameters.parse(kept);

    assertThat(p.names()).as("only the last one is a parameter").isEqualTo(List.of("ids"));
    assertThat(p.sql()).isEqualTo(kept.replace("ANY(:ids)", "ANY(?)"));
  }

  @Test
  void should_bind_a_parameter_a_cast_follows() {
    SqlParameters p =
        SqlParameters.parse("INSERT INTO synced (g, id) SELECT :group_id::uuid, unnest(:ids)");

    assertThat(p.sql()).isEqualTo("INSERT INTO synced (g, id) SELECT ?::uuid, unnest(?)");
    assertThat(p.names()).containsExactly("group_id", "ids");
  }

  @Test
  void should_escape_a_question_mark_operator_for_the_driver() {
    SqlParameters p = SqlParameters.parse("SELECT doc ? 'k', '?' FROM t WHERE id = ANY(:ids)");

    assertThat(p.sql()).isEqualTo("SELECT doc ?? 'k', '?' FROM t WHERE id = ANY(?)");
  }

  @Test
  void should_tell_a_statement_that_uses_ids_only_in_a_comment() {
    assertThat(SqlParameters.parse("DELETE FROM x -- by :ids").uses("ids")).isFalse();
    assertThat(SqlParameters.parse("DELETE FROM x WHERE id = ANY(:ids)").uses("ids")).isTrue();
  }
}
