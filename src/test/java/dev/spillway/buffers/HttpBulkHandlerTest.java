package dev.spillway.buffers;

import static org.assertj.core.api.Assertions.assertThat;

import com.sun.net.httpserver.HttpServer;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

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
    CountDownLatch release = new CountDownLatch(1);
    HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    server.createContext(
        "/bulk",
        exchange -> {
          try {
            release.await(10, TimeUnit.SECONDS);
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          }
          exchange.sendResponseHeaders(200, -1);
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
}
