package dev.spillway.ops;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.time.Instant;
import org.junit.jupiter.api.Test;

class StatusClientTest {
  @Test
  void should_read_a_report_of_another_version_passing_over_what_it_does_not_know()
      throws Exception {
    StatusReport read =
        StatusClient.read("{\"pid\": 42, \"startedAt\": \"then\", \"addedLater\": {\"x\": 1}}", 1);

    assertThat(read.pid()).isEqualTo(42);
    assertThat(read.startedAt()).isEqualTo("then");
  }

  @Test
  void should_render_a_report_of_an_older_version_that_leaves_lists_out() throws Exception {
    StatusReport read =
        StatusClient.read(
            """
            {"pid": 7, "startedAt": "then",
             "kafka": {"bootstrapServers": "localhost:9092", "embedded": false},
             "databases": [{"name": "main", "url": "jdbc:postgresql://db/app", "embedded": false}],
             "capture": [{"database": "main", "table": "public.projects", "operation": "delete",
                          "changes": 3}]}
            """,
            1);

    assertThat(StatusText.render(read, Instant.parse("2026-01-01T00:00:00Z")))
        .contains("Kafka     localhost:9092")
        .contains("Database  main     jdbc:postgresql://db/app")
        .contains("public.projects");
    assertThat(read.health()).isEmpty();
    assertThat(read.databases().get(0).slots()).isEmpty();
  }

  @Test
  void should_say_in_one_sentence_what_it_cannot_read() {
    assertThatThrownBy(() -> StatusClient.read("{\"pid\": \"not a number\"}", 8088))
        .isInstanceOf(IOException.class)
        .hasMessageStartingWith(
            "The status API on port 8088 answered a report this version of Spillway cannot read (")
        .hasMessageEndingWith(
            "); is the process there another version? Its own status command reads it.")
        .hasMessageNotContaining("\n");
  }

  @Test
  void should_say_nothing_answers_on_a_port_nobody_listens_on() throws Exception {
    int nobody;
    try (java.net.ServerSocket closed = new java.net.ServerSocket(0)) {
      nobody = closed.getLocalPort();
    }
    int port = nobody;
    assertThatThrownBy(() -> StatusClient.fetch(port))
        .isInstanceOf(IOException.class)
        .hasMessage(
            "Nothing answers on port "
                + port
                + ", where the running process serves its status: it may be stopping; run the"
                + " command again");
  }

  @Test
  void should_name_the_port_and_the_wait_when_the_process_takes_the_request_and_never_answers()
      throws Exception {
    try (java.net.ServerSocket silent = new java.net.ServerSocket(0)) {
      int port = silent.getLocalPort(); // the backlog takes the connection; nothing reads it
      assertThatThrownBy(
              () -> StatusClient.get(port, "/api/status", java.time.Duration.ofMillis(300)))
          .isInstanceOf(IOException.class)
          .hasMessage(
              "The running process on port "
                  + port
                  + " gave no answer to /api/status within 300ms: it may be overloaded (a long"
                  + " garbage collection, say); run the command again");
    }
  }
}
