package dev.spillway.buffers;

import static org.assertj.core.api.Assertions.assertThat;

import com.sun.net.httpserver.HttpHandler;
import com.sun.net.httpserver.HttpServer;
import dev.spillway.testing.BulkReceiver;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Flow;
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

  /** A receiver on a free local port, answering requests under {@code path} with {@code answer}. */
  private static HttpServer serving(String path, HttpHandler answer) throws java.io.IOException {
    HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    server.createContext(path, answer);
    server.start();
    return server;
  }

  private static String address(HttpServer server) {
    return "http://127.0.0.1:" + server.getAddress().getPort();
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
  void should_post_plain_http_as_http_1_1_without_asking_to_upgrade() throws Exception {
    try (BulkReceiver receiver = new BulkReceiver()) {
      BulkHandler.Result r =
          handler(receiver.url().toString(), Duration.ofSeconds(5)).handle(BATCH);

      assertThat(r).isInstanceOf(BulkHandler.Result.Success.class);
      assertThat(receiver.calls())
          .singleElement()
          .satisfies(
              call -> {
                assertThat(call.headers()).containsEntry("idempotency-key", "g-1");
                assertThat(call.headers()).doesNotContainKeys("upgrade", "http2-settings");
                assertThat(call.headers().getOrDefault("connection", ""))
                    .doesNotContainIgnoringCase("upgrade");
              });
    }
  }

  @Test
  void should_say_how_long_it_waited_for_an_answer() throws Exception {
    BulkHandler.Result r = stalled(0, "");

    assertThat(r).isInstanceOf(BulkHandler.Result.Retry.class);
    assertThat(((BulkHandler.Result.Retry) r).reason())
        .isEqualTo("POST " + url + " failed: no answer within 300ms (HttpTimeoutException)");
  }

  @Test
  @Timeout(30) // without a bound on the body, the call waits for the receiver for ever
  void should_count_a_2xx_whose_body_stalled_as_done() throws Exception {
    // the receiver took the rows: sending them again would apply them twice
    assertThat(stalled(200, "{\"accepted\":")).isInstanceOf(BulkHandler.Result.Success.class);
  }

  @Test
  @Timeout(30)
  void should_retry_a_503_whose_body_stalled_saying_what_came() throws Exception {
    BulkHandler.Result r = stalled(503, "queue full");

    assertThat(r).isInstanceOf(BulkHandler.Result.Retry.class);
    assertThat(((BulkHandler.Result.Retry) r).reason())
        .isEqualTo("POST " + url + " answered 503: queue full (its body not whole within 300ms)");
  }

  private String url;

  /**
   * The result of a call with a 300 ms timeout to a receiver that stalls for up to 20 s: before its
   * status line ({@code status} 0), or after its headers and the first bytes of the 1,000 bytes of
   * body they promise.
   */
  private BulkHandler.Result stalled(int status, String start) throws Exception {
    CountDownLatch release = new CountDownLatch(1);
    HttpServer server =
        serving(
            "/bulk",
            exchange -> {
              if (status > 0) {
                exchange.sendResponseHeaders(status, 1000);
                exchange.getResponseBody().write(start.getBytes(StandardCharsets.UTF_8));
                exchange.getResponseBody().flush();
              }
              try {
                release.await(20, TimeUnit.SECONDS);
              } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
              }
              if (status == 0) {
                exchange.sendResponseHeaders(200, -1);
              }
              exchange.close();
            });
    url = address(server) + "/bulk";
    try {
      return handler(url, Duration.ofMillis(300)).handle(BATCH);
    } finally {
      release.countDown();
      server.stop(0);
    }
  }

  @Test
  void should_retry_a_request_timeout_a_conflict_and_too_early_and_reject_other_4xx()
      throws Exception {
    HttpServer server =
        serving(
            "/",
            exchange -> {
              exchange.getRequestBody().readAllBytes();
              exchange.sendResponseHeaders(
                  Integer.parseInt(exchange.getRequestURI().getPath().substring(1)), -1);
              exchange.close();
            });
    String base = address(server) + "/";
    try {
      // 409: a receiver keyed by Idempotency-Key still working on an earlier try of the batch.
      for (int status : new int[] {408, 409, 425, 429, 500, 503}) {
        assertThat(handler(base + status, Duration.ofSeconds(10)).handle(BATCH))
            .as("%d", status)
            .isInstanceOf(BulkHandler.Result.Retry.class);
      }
      for (int status : new int[] {400, 401, 404, 413, 422}) {
        assertThat(handler(base + status, Duration.ofSeconds(10)).handle(BATCH))
            .as("%d", status)
            .isInstanceOf(BulkHandler.Result.Reject.class);
      }
    } finally {
      server.stop(0);
    }
  }

  private static final Duration TIMEOUT = Duration.ofSeconds(10);

  @Test
  void should_keep_a_token_in_the_url_query_out_of_reasons_and_logs() throws Exception {
    HttpServer server =
        serving(
            "/",
            exchange -> {
              exchange.getRequestBody().readAllBytes();
              if (exchange.getRequestURI().getPath().equals("/moved")) {
                // The usual move to https, keeping the query.
                exchange
                    .getResponseHeaders()
                    .set("Location", "https://hooks.example/bulk?api_key=s3cret");
                exchange.sendResponseHeaders(301, -1);
              } else {
                exchange.sendResponseHeaders(
                    exchange.getRequestURI().getQuery().equals("api_key=s3cret") ? 400 : 200, -1);
              }
              exchange.close();
            });
    String url = address(server) + "/bulk?api_key=s3cret";
    try {
      BulkHandler.Result answered = handler(url, Duration.ofSeconds(10)).handle(BATCH);

      assertThat(answered).isInstanceOf(BulkHandler.Result.Reject.class);
      assertThat(((BulkHandler.Result.Reject) answered).reason())
          .isEqualTo("POST " + address(server) + "/bulk?… answered 400");
      BulkHandler.Result moved =
          handler(address(server) + "/moved?api_key=s3cret", Duration.ofSeconds(10)).handle(BATCH);
      assertThat(((BulkHandler.Result.Reject) moved).reason())
          .isEqualTo(
              "POST "
                  + address(server)
                  + "/moved?… answered 301 (a redirect to https://hooks.example/bulk?…, which"
                  + " Spillway does not follow: set the buffer's url to where it points)");
      assertThat(
              new HandlerSpec.Http(URI.create(url), Map.of("Authorization", "Bearer x"), TIMEOUT)
                  .toString())
          .isEqualTo("http " + address(server) + "/bulk?… (headers [Authorization], timeout 10s)");
    } finally {
      server.stop(0);
    }
  }

  /** A handler reading its responses at {@code clock}'s time. */
  private static HttpBulkHandler at(Clock clock) {
    return new HttpBulkHandler(
        new HandlerSpec.Http(URI.create("http://x/"), Map.of(), Duration.ofSeconds(1)), clock);
  }

  @Test
  void should_read_retry_after_as_seconds_or_a_date_and_ignore_a_negative_one() {
    Clock clock = Clock.fixed(Instant.parse("2026-11-25T08:00:00Z"), ZoneOffset.UTC);
    HttpBulkHandler h = at(clock);

    assertThat(h.retryAfter(Optional.of(" 120 "), Optional.empty()))
        .contains(Duration.ofSeconds(120));
    assertThat(h.retryAfter(Optional.of("Wed, 25 Nov 2026 08:01:30 GMT"), Optional.empty()))
        .contains(Duration.ofSeconds(90));
    assertThat(h.retryAfter(Optional.of("Wed, 25 Nov 2026 07:00:00 GMT"), Optional.empty()))
        .as("a date gone by")
        .contains(Duration.ZERO);
    assertThat(h.retryAfter(Optional.of("Wednesday, 25-Nov-26 08:01:30 GMT"), Optional.empty()))
        .as("the obsolete RFC 850 form")
        .contains(Duration.ofSeconds(90));
    assertThat(h.retryAfter(Optional.of("Wed Nov 25 08:01:30 2026"), Optional.empty()))
        .as("the obsolete asctime form")
        .contains(Duration.ofSeconds(90));
    assertThat(h.retryAfter(Optional.of("-5"), Optional.empty()))
        .as("not a valid value: the backoff then")
        .isEmpty();
    assertThat(h.retryAfter(Optional.of("99999999999999999999"), Optional.empty()))
        .as("more than a long holds: the longest wait, which the buffer bounds")
        .contains(Duration.ofSeconds(Long.MAX_VALUE));
    assertThat(h.retryAfter(Optional.of("0000000000000000000120"), Optional.empty()))
        .as("leading zeros")
        .contains(Duration.ofSeconds(120));
    assertThat(h.retryAfter(Optional.of("soon"), Optional.empty())).isEmpty();
    assertThat(h.retryAfter(Optional.of("Tue, 25 Nov 2026 08:01:30 GMT"), Optional.empty()))
        .as("a weekday that is not the date's")
        .isEmpty();
  }

  @Test
  void should_measure_a_retry_after_date_from_the_responses_own_date() {
    // This machine's clock is a minute ahead of the receiver's, which asks for 30 s.
    Clock clock = Clock.fixed(Instant.parse("2026-11-25T08:01:00Z"), ZoneOffset.UTC);
    HttpBulkHandler h = at(clock);

    assertThat(
            h.retryAfter(
                Optional.of("Wed, 25 Nov 2026 08:00:30 GMT"),
                Optional.of("Wed, 25 Nov 2026 08:00:00 GMT")))
        .contains(Duration.ofSeconds(30));
    assertThat(h.retryAfter(Optional.of("Wed, 25 Nov 2026 08:00:30 GMT"), Optional.of("yesterday")))
        .as("a Date it cannot read: this machine's clock")
        .contains(Duration.ZERO);
    assertThat(h.retryAfter(Optional.of("120"), Optional.of("Wed, 25 Nov 2026 08:00:00 GMT")))
        .as("seconds need no clock")
        .contains(Duration.ofSeconds(120));
  }

  @Test
  void should_read_a_two_digit_year_as_at_most_fifty_years_ahead() {
    Instant now = Instant.parse("2026-11-25T08:00:00Z");
    assertThat(HttpBulkHandler.httpDate("Thursday, 06-Nov-70 08:49:37 GMT", now))
        .contains(Instant.parse("2070-11-06T08:49:37Z"));
    assertThat(HttpBulkHandler.httpDate("Sunday, 06-Nov-77 08:49:37 GMT", now))
        .contains(Instant.parse("1977-11-06T08:49:37Z"));
    assertThat(HttpBulkHandler.httpDate("Sun Nov  6 08:49:37 1994", now))
        .contains(Instant.parse("1994-11-06T08:49:37Z"));
  }

  @Test
  void should_keep_only_the_beginning_of_a_body_and_read_past_the_rest() {
    HttpBulkHandler.BodyHead head = new HttpBulkHandler.BodyHead(8, null);
    long[] requested = {0};
    head.onSubscribe(
        new Flow.Subscription() {
          @Override
          public void request(long n) {
            requested[0] += n;
          }

          @Override
          public void cancel() {
            throw new AssertionError("the rest of the body is read, not cancelled");
          }
        });
    ByteBuffer first = ByteBuffer.wrap("overload".getBytes(StandardCharsets.UTF_8));
    ByteBuffer rest = ByteBuffer.wrap(new byte[1 << 20]);
    head.onNext(List.of(ByteBuffer.wrap("ov".getBytes(StandardCharsets.UTF_8))));
    head.onNext(List.of(first, rest));
    head.onComplete();

    assertThat(requested[0]).isEqualTo(Long.MAX_VALUE);
    assertThat(head.getBody().toCompletableFuture().join()).isEqualTo("ovoverlo");
  }

  @Test
  void should_show_the_beginning_of_a_large_error_body() throws Exception {
    byte[] body = new byte[4 << 20];
    Arrays.fill(body, (byte) 'x');
    byte[] start = "queue full, try later ".getBytes(StandardCharsets.UTF_8);
    System.arraycopy(start, 0, body, 0, start.length);
    String reason = reasonOf503(body);

    String answered =
        reason.substring(0, reason.indexOf(" answered 503") + " answered 503".length());
    assertThat(reason)
        .startsWith(answered + ": queue full, try later xxx")
        .endsWith("x...")
        .hasSize((answered + ": ").length() + 200 + 3);
  }

  @Test
  void should_read_no_more_of_an_error_body_than_its_first_8_kib() throws Exception {
    byte[] body = (" ".repeat(9000) + "queue full").getBytes(StandardCharsets.UTF_8);

    // Past the first 8 KiB, kept: only blanks, so the reason shows none of the body.
    assertThat(reasonOf503(body)).endsWith(" answered 503");
  }

  @Test
  void should_reject_a_redirect_naming_where_it_points() throws Exception {
    HttpServer server =
        serving(
            "/",
            exchange -> {
              exchange.getRequestBody().readAllBytes();
              String path = exchange.getRequestURI().getPath();
              String to =
                  path.equals("/old")
                      ? "/v2/bulk"
                      : path.equals("/long") ? LONG_LOCATION : "https://crm.example/bulk";
              exchange.getResponseHeaders().add("Location", to);
              exchange.sendResponseHeaders(301, -1);
              exchange.close();
            });
    String base = address(server);
    try {
      for (String path : new String[] {"/old", "/bulk"}) {
        BulkHandler.Result r = handler(base + path, Duration.ofSeconds(10)).handle(BATCH);
        assertThat(r).isInstanceOf(BulkHandler.Result.Reject.class);
        assertThat(((BulkHandler.Result.Reject) r).reason())
            .isEqualTo(
                "POST "
                    + base
                    + path
                    + " answered 301 (a redirect to "
                    + (path.equals("/old") ? base + "/v2/bulk" : "https://crm.example/bulk")
                    + ", which Spillway does not follow: set the buffer's url to where it points)");
      }
      BulkHandler.Result r = handler(base + "/long", Duration.ofSeconds(10)).handle(BATCH);
      assertThat(((BulkHandler.Result.Reject) r).reason())
          .as("a location kept to its first 200 characters, as a body is")
          .contains("(a redirect to " + LONG_LOCATION.substring(0, 200) + "..., which");
    } finally {
      server.stop(0);
    }
  }

  private static final String LONG_LOCATION = "https://crm.example/" + "x".repeat(300);

  /** The reason of a call a receiver answers with 503 and this body. */
  private static String reasonOf503(byte[] body) throws Exception {
    HttpServer server =
        serving(
            "/bulk",
            exchange -> {
              exchange.getRequestBody().readAllBytes();
              exchange.sendResponseHeaders(503, body.length);
              exchange.getResponseBody().write(body);
              exchange.close();
            });
    String url = address(server) + "/bulk";
    try {
      BulkHandler.Result r = handler(url, Duration.ofSeconds(10)).handle(BATCH);
      assertThat(r).isInstanceOf(BulkHandler.Result.Retry.class);
      String reason = ((BulkHandler.Result.Retry) r).reason();
      assertThat(reason).startsWith("POST " + url + " answered 503");
      return reason;
    } finally {
      server.stop(0);
    }
  }
}
