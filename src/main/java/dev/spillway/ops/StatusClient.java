package dev.spillway.ops;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import dev.spillway.config.DurationText;
import java.io.IOException;
import java.net.ConnectException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpConnectTimeoutException;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.time.Duration;

/** Reads the status report of a running Spillway process over its HTTP port. */
public final class StatusClient {
  private static final Duration CONNECT_TIMEOUT = Duration.ofSeconds(5);

  private StatusClient() {}

  public static StatusReport fetch(int port) throws IOException, InterruptedException {
    HttpResponse<String> response = get(port, "/api/status", Duration.ofSeconds(30));
    if (response.statusCode() != 200) {
      String body = response.body() == null ? "" : response.body().strip();
      throw new IOException(
          "The status API on port "
              + port
              + " answered HTTP "
              + response.statusCode()
              + (body.isEmpty() || body.contains("\n") ? "." : ": " + body));
    }
    return read(response.body(), port);
  }

  /**
   * A {@code GET} of {@code path} on the running process's HTTP port; nothing answering there (the
   * process stopping, say) is said in a sentence rather than as the client's exception, which has
   * no message.
   */
  public static HttpResponse<String> get(int port, String path, Duration timeout)
      throws IOException, InterruptedException {
    HttpClient client = HttpClient.newBuilder().connectTimeout(CONNECT_TIMEOUT).build();
    HttpRequest request =
        HttpRequest.newBuilder(URI.create("http://localhost:" + port + path))
            .timeout(timeout)
            .build();
    try {
      return client.send(request, HttpResponse.BodyHandlers.ofString());
    } catch (ConnectException e) {
      throw new IOException(
          "Nothing answers on port "
              + port
              + ", where the running process serves its status: it may be stopping; run the"
              + " command again",
          e);
    } catch (HttpConnectTimeoutException e) {
      throw new IOException(
          "The running process took no connection on port "
              + port
              + " within "
              + CONNECT_TIMEOUT.toSeconds()
              + " s: it may be stopping or overloaded; run the command again",
          e);
    } catch (HttpTimeoutException e) {
      throw new IOException(
          "The running process on port "
              + port
              + " gave no answer to "
              + path
              + " within "
              + DurationText.format(timeout)
              + ": it may be overloaded (a long garbage collection, say); run the command again",
          e);
    }
  }

  /**
   * The report as this version reads it: what a process of another version adds is passed over (an
   * upgrade leaves the old one running until it is restarted); what cannot be read is said in one
   * sentence.
   */
  static StatusReport read(String body, int port) throws IOException {
    try {
      return HttpEndpoint.JSON
          .readerFor(StatusReport.class)
          .without(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES)
          .readValue(body);
    } catch (JsonProcessingException e) {
      throw new IOException(
          "The status API on port "
              + port
              + " answered a report this version of Spillway cannot read ("
              + e.getOriginalMessage()
              + "); is the process there another version? Its own status command reads it.",
          e);
    }
  }
}
