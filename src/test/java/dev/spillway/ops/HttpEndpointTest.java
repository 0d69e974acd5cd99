package dev.spillway.ops;

import static org.assertj.core.api.Assertions.assertThat;

import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

class HttpEndpointTest {
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

  private static HttpResponse<String> get(int port, String path) throws Exception {
    return HttpClient.newHttpClient()
        .send(
            HttpRequest.newBuilder(URI.create("http://localhost:" + port + path)).build(),
            HttpResponse.BodyHandlers.ofString());
  }
}
