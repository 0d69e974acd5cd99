package dev.spillway.ops;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;

/** Reads the status report of a running Spillway process over its HTTP port. */
public final class StatusClient {
  private StatusClient() {}

  public static StatusReport fetch(int port) throws IOException, InterruptedException {
    HttpClient client = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
    HttpRequest request =
        HttpRequest.newBuilder(URI.create("http://localhost:" + port + "/api/status"))
            .timeout(Duration.ofSeconds(30))
            .build();
    HttpResponse<String> response = client.send(request, HttpResponse.BodyHandlers.ofString());
    if (response.statusCode() != 200) {
      String body = response.body() == null ? "" : response.body().strip();
      throw new IOException(
          "The status API on port "
              + port
              + " answered HTTP "
              + response.statusCode()
              + (body.isEmpty() || body.contains("\n") ? "." : ": " + body));
    }
    return HttpEndpoint.JSON.readValue(response.body(), StatusReport.class);
  }
}
