package dev.spillway.buffers;

import static org.assertj.core.api.Assertions.assertThat;

import com.sun.net.httpserver.HttpServer;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** What the HTTP handler says when a receiver cannot be reached, against real sockets. */
class HttpBulkHandlerTest {
  private static final BulkHandler.Batch BATCH =
      new BulkHandler.Batch("b", "g-1", 1, "id", List.of(Map.of("id", 1)));

  private static HttpBulkHandler handler(String url, Duration timeout) {
    return new HttpBulkHandler(
        new HandlerSpec.Http(URI.create(url), Map.of(), timeout), Clock.systemUTC());
  }

  @Test
  void should_say_it_could_not_connect_when_nothing_listens() throws Exception {
    int closed;
    try (ServerSocket s = new ServerSocket(0)) {
      closed = s.getLocalPort();
    }
    String url = "http://127.0.0.1:" + closed + "/bulk";

    BulkHandler.Result r = handler(url, Duration.ofSeconds(2)).handle(BATCH);

    assertThat(r).isInstanceOf(BulkHandler.Result.Retry.class);
    // The JDK 17 client gives a refused connection no message; another JDK may add one.
    assertThat(((BulkHandler.Result.Retry) r).reason())
        .startsWith("POST " + url + " failed: could not connect")
        .endsWith("(ConnectException)")
        .doesNotContain("null");
  }

  @Test
  void should_say_how_long_it_waited_for_an_answer() throws Exception {
    assertNoAnswerWithin300ms(false);
  }

  @Test
  @Timeout(30) // without a bound on the body, the call waits for the receiver for ever
  void should_say_how_long_it_waited_for_an_answer_whose_body_stalled() throws Exception {
    assertNoAnswerWithin300ms(true);
  }

  /**
   * Against a receiver that stalls for up to 20 s: before its status line, or after its headers and
   * 10 of the 1,000 bytes of body they promise.
   */
  private static void assertNoAnswerWithin300ms(boolean headersFirst) throws Exception {
    CountDownLatch release = new CountDownLatch(1);
    HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    server.createContext(
        "/bulk",
        exchange -> {
          if (headersFirst) {
            exchange.sendResponseHeaders(200, 1000);
            exchange.getResponseBody().write(new byte[10]);
            exchange.getResponseBody().flush();
          }
          try {
            release.await(20, TimeUnit.SECONDS);
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          }
          if (!headersFirst) {
            exchange.sendResponseHeaders(200, -1);
          }
          exchange.close();
        });
    server.start();
    String url = "http://127.0.0.1:" + server.getAddress().getPort() + "/bulk";
    try {
      BulkHandler.Result r = handler(url, Duration.ofMillis(300)).handle(BATCH);

      assertThat(r).isInstanceOf(BulkHandler.Result.Retry.class);
      assertThat(((BulkHandler.Result.Retry) r).reason())
          .isEqualTo("POST " + url + " failed: no answer within 300ms (HttpTimeoutException)");
    } finally {
      release.countDown();
      server.stop(0);
    }
  }

  @Test
  void should_read_retry_after_as_seconds_or_a_date_and_ignore_a_negative_one() {
    Clock clock = Clock.fixed(Instant.parse("2026-11-25T08:00:00Z"), ZoneOffset.UTC);
    HttpBulkHandler h =
        new HttpBulkHandler(
            new HandlerSpec.Http(URI.create("http://x/"), Map.of(), Duration.ofSeconds(1)), clock);

    assertThat(h.retryAfter(Optional.of(" 120 "))).contains(Duration.ofSeconds(120));
    assertThat(h.retryAfter(Optional.of("Wed, 25 Nov 2026 08:01:30 GMT")))
        .contains(Duration.ofSeconds(90));
    assertThat(h.retryAfter(Optional.of("Wed, 25 Nov 2026 07:00:00 GMT")))
        .as("a date gone by")
        .contains(Duration.ZERO);
    assertThat(h.retryAfter(Optional.of("-5"))).as("not a valid value: the backoff then").isEmpty();
    assertThat(h.retryAfter(Optional.of("soon"))).isEmpty();
  }
}
