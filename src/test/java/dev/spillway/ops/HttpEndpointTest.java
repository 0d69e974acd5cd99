package dev.spillway.ops;

import static org.assertj.core.api.Assertions.assertThat;

import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

class HttpEndpointTest {
  @Test
  void should_tell_a_port_another_process_holds_from_one_the_system_refuses() {
    assertThat(
            new HttpEndpoint.PortUnavailableException(
                    8088, new java.net.BindException("Address already in use"))
                .getMessage())
        .isEqualTo("HTTP port 8088 is already in use; set http.port to a free port (0 picks one).");
    // The system's words in another language: above 1024 only another process can hold it.
    assertThat(
            new HttpEndpoint.PortUnavailableException(
                    8088, new java.net.BindException("Die Adresse wird bereits verwendet"))
                .getMessage())
        .startsWith("HTTP port 8088 is already in use;");
    // As a user without the privilege for a port below 1024 is answered (not seen as root).
    assertThat(
            new HttpEndpoint.PortUnavailableException(
                    80, new java.net.BindException("Permission denied"))
                .getMessage())
        .isEqualTo(
            "HTTP port 80 cannot be taken (Permission denied); set http.port to another port (0"
                + " picks one; one below 1024 needs the privilege to bind it).");
  }

  @Test
  void should_answer_the_liveness_probe_200_while_running_and_503_with_why_once_failed()
      throws Exception {
    AtomicReference<Optional<String>> failure = new AtomicReference<>(Optional.empty());
    try (HttpEndpoint http =
        HttpEndpoint.start(
            0,
            new PrometheusMeterRegistry(PrometheusConfig.DEFAULT),
            () -> {
              throw new AssertionError("the probe must not build a status report");
            },
            failure::get)) {
      HttpResponse<String> running = get(http.port(), "/livez");
      assertThat(running.statusCode()).isEqualTo(200);
      assertThat(running.body()).isEqualTo("running\n");

      failure.set(Optional.of("Streams application spillway.lfk.batcher failed: boom"));
      HttpResponse<String> failed = get(http.port(), "/livez");

      assertThat(failed.statusCode()).isEqualTo(503);
      assertThat(failed.body())
          .isEqualTo("failed: Streams application spillway.lfk.batcher failed: boom\n");
    }
  }

  @Test
  void should_show_a_browser_the_status_as_a_page_that_reads_it_again_and_curl_the_index()
      throws Exception {
    AtomicReference<String> failure = new AtomicReference<>();
    java.util.function.Supplier<StatusReport> status =
        () ->
            report(
                42,
                List.of(
                    new StatusReport.HealthStatus(
                        "main", "public.events", "THROTTLE", "autovacuum <running> & busy")),
                failure.get());
    try (HttpEndpoint http =
        HttpEndpoint.start(
            0, new PrometheusMeterRegistry(PrometheusConfig.DEFAULT), status, Optional::empty)) {
      HttpResponse<String> page = get(http.port(), "/", "text/html,application/xhtml+xml");
      assertThat(page.statusCode()).isEqualTo(200);
      assertThat(page.headers().firstValue("Content-Type")).contains("text/html; charset=utf-8");
      assertThat(page.body())
          .startsWith("<!doctype html>")
          .contains("<meta http-equiv=\"refresh\" content=\"5\">")
          .contains("Spillway pid 42, running since 2026-11-24T09:00:00Z")
          .contains("main public.events")
          .contains("THROTTLE autovacuum &lt;running&gt; &amp; busy")
          .contains("<a href=\"/api/status\">")
          .doesNotContain("FAILED");

      failure.set("Streams application spillway.lfk.batcher failed: boom");
      assertThat(get(http.port(), "/", "text/html").body())
          .contains(
              "<p class=\"failed\">FAILED: Streams application spillway.lfk.batcher failed:"
                  + " boom</p>");

      HttpResponse<String> index = get(http.port(), "/", "*/*");
      assertThat(index.headers().firstValue("Content-Type")).contains("text/plain; charset=utf-8");
      assertThat(index.body()).startsWith("Spillway\n  /            the dashboard, in a browser\n");
      assertThat(get(http.port(), "/nothing", "text/html").statusCode()).isEqualTo(404);
    }
  }

  @Test
  void should_answer_head_leave_longer_paths_unfound_and_refuse_methods_that_write()
      throws Exception {
    try (HttpEndpoint http =
        HttpEndpoint.start(
            0,
            new PrometheusMeterRegistry(PrometheusConfig.DEFAULT),
            () -> report(7, List.of(), null),
            Optional::empty)) {
      // The JDK's server warns of a HEAD answered with a length, and drops the connection.
      List<java.util.logging.LogRecord> warned = new java.util.concurrent.CopyOnWriteArrayList<>();
      java.util.logging.Handler warnings =
          new java.util.logging.Handler() {
            @Override
            public void publish(java.util.logging.LogRecord r) {
              if (r.getLevel().intValue() >= java.util.logging.Level.WARNING.intValue()) {
                warned.add(r);
              }
            }

            @Override
            public void flush() {}

            @Override
            public void close() {}
          };
      java.util.logging.Logger server =
          java.util.logging.Logger.getLogger("com.sun.net.httpserver");
      server.addHandler(warnings);
      HttpClient client = HttpClient.newHttpClient();
      for (String path : List.of("/livez", "/metrics", "/api/status", "/")) {
        HttpResponse<String> head =
            client.send(
                HttpRequest.newBuilder(URI.create("http://localhost:" + http.port() + path))
                    .method("HEAD", HttpRequest.BodyPublishers.noBody())
                    .timeout(java.time.Duration.ofSeconds(5))
                    .build(),
                HttpResponse.BodyHandlers.ofString());
        assertThat(head.statusCode()).as("HEAD " + path).isEqualTo(200);
        assertThat(head.body()).as("HEAD " + path).isEmpty();
        assertThat(head.headers().firstValue("Content-Type")).as("HEAD " + path).isPresent();
      }
      server.removeHandler(warnings);
      assertThat(warned).extracting(java.util.logging.LogRecord::getMessage).isEmpty();
      for (String path : List.of("/livez-x", "/metricsX", "/api/status/anything", "/api")) {
        assertThat(get(http.port(), path).statusCode()).as(path).isEqualTo(404);
      }
      HttpResponse<String> post =
          client.send(
              HttpRequest.newBuilder(URI.create("http://localhost:" + http.port() + "/metrics"))
                  .POST(HttpRequest.BodyPublishers.ofString("x"))
                  .timeout(java.time.Duration.ofSeconds(5))
                  .build(),
              HttpResponse.BodyHandlers.ofString());
      assertThat(post.statusCode()).isEqualTo(405);
      assertThat(post.headers().firstValue("Allow")).contains("GET, HEAD");
      assertThat(get(http.port(), "/livez").body()).isEqualTo("running\n");
    }
  }

  @Test
  void should_answer_while_a_status_report_is_slow_to_make_with_the_last_one_made()
      throws Exception {
    SlowReports reports = new SlowReports(2);
    try (HttpEndpoint http =
        HttpEndpoint.start(
            0, new PrometheusMeterRegistry(PrometheusConfig.DEFAULT), reports, Optional::empty)) {
      int port = http.port();
      assertThat(get(port, "/api/status", "text/html").body()).contains("\"pid\" : 1");
      var waiting = getAsync(port, "/api/status", "text/html");
      reports.awaitSlow();
      // Meanwhile: the last report made, and the probe, each at once, however many ask.
      for (int i = 0; i < 4; i++) {
        assertThat(get(port, "/", "text/html").body()).contains("Spillway pid 1, running since");
      }
      assertThat(get(port, "/livez", "text/html").body()).isEqualTo("running\n");
      reports.release();
      assertThat(waiting.get(5, TimeUnit.SECONDS).body()).contains("\"pid\" : 2");
      assertThat(reports.made()).isEqualTo(2);
    }
  }

  @Test
  void should_tell_of_a_failure_in_the_last_report_made_while_another_is_slow_to_make()
      throws Exception {
    SlowReports reports = new SlowReports(2);
    try (HttpEndpoint http =
        HttpEndpoint.start(
            0,
            new PrometheusMeterRegistry(PrometheusConfig.DEFAULT),
            reports,
            () -> Optional.ofNullable(reports.failed.get()))) {
      int port = http.port();
      assertThat(get(port, "/api/status").body()).contains("\"failure\" : null");
      var waiting = getAsync(port, "/api/status", null);
      reports.awaitSlow();
      reports.failed.set(
          "sink lfk failed: batch spillway.lfk.cleanup-batches-0@7 ended with an error");

      assertThat(get(port, "/api/status").body())
          .as("the last report made, with the failure since")
          .contains("\"pid\" : 1")
          .contains("\"failure\" : \"sink lfk failed: batch spillway.lfk.cleanup-batches-0@7");
      reports.release();
      assertThat(waiting.get(5, TimeUnit.SECONDS).body()).contains("\"pid\" : 2");
    }
  }

  @Test
  void should_answer_the_probe_while_clients_hold_requests_half_sent() throws Exception {
    List<Socket> stalled = new ArrayList<>();
    try (HttpEndpoint http =
        HttpEndpoint.start(
            0,
            new PrometheusMeterRegistry(PrometheusConfig.DEFAULT),
            () -> report(1, List.of(), null),
            Optional::empty)) {
      for (int i = 0; i < 8; i++) {
        Socket s = new Socket("localhost", http.port());
        stalled.add(s);
        // A request line and no end of headers: the server waits for the rest.
        s.getOutputStream().write("GET /metrics HTTP/1.1\r\nHost: x\r\n".getBytes());
        s.getOutputStream().flush();
      }

      HttpResponse<String> probe = get(http.port(), "/livez");

      assertThat(probe.statusCode()).isEqualTo(200);
      assertThat(probe.body()).isEqualTo("running\n");
    } finally {
      for (Socket s : stalled) {
        s.close();
      }
    }
  }

  @Test
  void should_say_the_first_report_is_not_made_yet_while_it_is_and_keep_answering_the_probe()
      throws Exception {
    SlowReports reports = new SlowReports(1);
    try (HttpEndpoint http =
        HttpEndpoint.start(
            0, new PrometheusMeterRegistry(PrometheusConfig.DEFAULT), reports, Optional::empty)) {
      var making = getAsync(http.port(), "/api/status", null);
      reports.awaitSlow();
      for (int i = 0; i < 4; i++) {
        HttpResponse<String> notYet =
            get(http.port(), i % 2 == 0 ? "/api/status" : "/", "text/html");
        assertThat(notYet.statusCode()).isEqualTo(503);
        assertThat(notYet.body())
            .isEqualTo(
                "The first status report is still being made (a database slow to answer?); ask"
                    + " again in a moment.\n");
      }
      assertThat(get(http.port(), "/livez").statusCode()).isEqualTo(200);
      reports.release();
      assertThat(making.get(5, TimeUnit.SECONDS).body()).contains("\"pid\" : 1");
    }
  }

  /**
   * Status reports numbered as made (the pid says which), each from the {@code firstSlow}-th on
   * waiting for {@link #release} as a report asking a database slow to answer does; each tells of
   * {@link #failed}.
   */
  private static final class SlowReports implements Supplier<StatusReport> {
    private final int firstSlow;
    private final AtomicInteger made = new AtomicInteger();
    private final CountDownLatch slow = new CountDownLatch(1);
    private final CountDownLatch entered = new CountDownLatch(1);
    final AtomicReference<String> failed = new AtomicReference<>();

    SlowReports(int firstSlow) {
      this.firstSlow = firstSlow;
    }

    @Override
    public StatusReport get() {
      int n = made.incrementAndGet();
      if (n >= firstSlow) {
        entered.countDown();
        try {
          slow.await();
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
      return report(n, List.of(), failed.get());
    }

    /** Waits until a slow report is being made. */
    void awaitSlow() throws InterruptedException {
      assertThat(entered.await(5, TimeUnit.SECONDS)).as("a slow report began").isTrue();
    }

    void release() {
      slow.countDown();
    }

    int made() {
      return made.get();
    }
  }

  private static StatusReport report(
      long pid, List<StatusReport.HealthStatus> health, String failure) {
    return new StatusReport(
        pid,
        "2026-11-24T09:00:00Z",
        new StatusReport.KafkaStatus("localhost:9092", false),
        List.of(),
        List.of(),
        false,
        health,
        List.of(),
        List.of(),
        null,
        List.of(),
        failure,
        null);
  }

  /** A GET of the path, with this Accept header (none when null), answered within 5 s. */
  private static HttpRequest request(int port, String path, String accept) {
    HttpRequest.Builder b =
        HttpRequest.newBuilder(URI.create("http://localhost:" + port + path))
            .timeout(java.time.Duration.ofSeconds(5));
    if (accept != null) {
      b.header("Accept", accept);
    }
    return b.build();
  }

  private static HttpResponse<String> get(int port, String path, String accept) throws Exception {
    return HttpClient.newHttpClient()
        .send(request(port, path, accept), HttpResponse.BodyHandlers.ofString());
  }

  private static HttpResponse<String> get(int port, String path) throws Exception {
    return get(port, path, null);
  }

  private static CompletableFuture<HttpResponse<String>> getAsync(
      int port, String path, String accept) {
    return HttpClient.newHttpClient()
        .sendAsync(request(port, path, accept), HttpResponse.BodyHandlers.ofString());
  }
}
