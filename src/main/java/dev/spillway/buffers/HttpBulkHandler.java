package dev.spillway.buffers;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.spillway.config.DurationText;
import dev.spillway.support.Causes;
import java.io.IOException;
import java.net.ConnectException;
import java.net.http.HttpClient;
import java.net.http.HttpConnectTimeoutException;
import java.net.http.HttpHeaders;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.time.format.DateTimeFormatterBuilder;
import java.time.format.DateTimeParseException;
import java.time.temporal.ChronoField;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Flow;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicReference;
import java.util.regex.Pattern;

/**
 * The HTTP bulk handler: {@code POST} of a JSON array, one object per row (column names as keys,
 * {@code bytea} as base64), with the group id in an {@code Idempotency-Key} header. 2xx is success,
 * also when its body does not come whole; 408, 425, 429 and 5xx, timeouts and connection failures
 * are retried, after {@code Retry-After} when the response has one; any other status rejects the
 * batch. Thread-safe.
 */
final class HttpBulkHandler implements BulkHandler {
  static final String IDEMPOTENCY_KEY = "Idempotency-Key";
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Pattern DIGITS = Pattern.compile("[0-9]+");
  private static final int MAX_BODY_IN_REASON = 200;

  /** Bytes of a response body kept for its reason: room for the shown part after blank runs. */
  private static final int MAX_BODY_KEPT = 8192;

  /** The obsolete HTTP date forms a receiver may still send (RFC 9110, section 5.6.7). */
  private static final DateTimeFormatter ASCTIME =
      DateTimeFormatter.ofPattern("EEE MMM ppd HH:mm:ss yyyy", Locale.US);

  private final HandlerSpec.Http spec;
  private final HttpClient client;
  private final Clock clock;

  HttpBulkHandler(HandlerSpec.Http spec, Clock clock) {
    this.spec = spec;
    this.clock = clock;
    HttpClient.Builder builder =
        HttpClient.newBuilder()
            .connectTimeout(spec.timeout())
            .followRedirects(HttpClient.Redirect.NEVER);
    if ("http".equalsIgnoreCase(spec.url().getScheme())) {
      // Else every POST asks to upgrade to cleartext HTTP/2 (Upgrade: h2c), which receivers that
      // take Upgrade for their own protocols, or close such connections, answer wrongly. Over TLS
      // the protocol is agreed in the handshake, HTTP/2 where the receiver offers it.
      builder.version(HttpClient.Version.HTTP_1_1);
    }
    this.client = builder.build();
  }

  @Override
  public Result handle(Batch batch) throws IOException, InterruptedException {
    HttpRequest.Builder request =
        HttpRequest.newBuilder(spec.url())
            .timeout(spec.timeout())
            .header("Content-Type", "application/json");
    spec.headers().forEach(request::header);
    request.header(IDEMPOTENCY_KEY, batch.groupId());
    byte[] body = JSON.writeValueAsBytes(batch.rows());
    // The request's own timeout ends when the status line and headers arrive; the body is bounded
    // here, so a receiver that stalls mid-answer does not hold the call (and its permit) for ever.
    AtomicReference<BodyHead> bodyHead = new AtomicReference<>(); // set once the status came
    CompletableFuture<HttpResponse<String>> answer =
        client.sendAsync(
            request.POST(HttpRequest.BodyPublishers.ofByteArray(body)).build(),
            info -> {
              bodyHead.set(new BodyHead(MAX_BODY_KEPT, info));
              return bodyHead.get();
            });
    try {
      HttpResponse<String> response = answer.get(spec.timeout().toNanos(), TimeUnit.NANOSECONDS);
      return answered(response.statusCode(), response.headers(), response.body(), "");
    } catch (TimeoutException e) {
      answer.cancel(true);
      return cutShort(bodyHead.get(), "not whole within " + DurationText.format(spec.timeout()))
          .orElseGet(() -> failed(noAnswer()));
    } catch (InterruptedException e) {
      answer.cancel(true);
      throw e;
    } catch (ExecutionException e) {
      if (e.getCause() instanceof IOException io) {
        return cutShort(bodyHead.get(), "cut short: " + failure(io))
            .orElseGet(() -> failed(failure(io)));
      }
      throw new IOException(e.getCause());
    }
  }

  /**
   * The status of a response whose body did not come whole: it answers for the batch as it would
   * with the body (a 2xx receiver took the rows); empty when not even the status came.
   */
  private Optional<Result> cutShort(BodyHead head, String why) {
    if (head == null) {
      return Optional.empty();
    }
    return Optional.of(
        answered(
            head.info.statusCode(), head.info.headers(), head.soFar(), " (its body " + why + ")"));
  }

  /** What a status says of the batch: done, retried or rejected, with the body's beginning. */
  private Result answered(int status, HttpHeaders headers, String body, String note) {
    if (status >= 200 && status < 300) {
      return Result.success();
    }
    String reason = "POST " + spec.shownUrl() + " answered " + status + snippet(body) + note;
    Optional<String> location = headers.firstValue("Location");
    if (status >= 300 && status < 400 && location.isPresent()) {
      // Not followed: a 301, 302 or 303 turns a POST into a GET without its rows.
      reason +=
          " (a redirect to "
              + shortened(HandlerSpec.Http.shown(resolved(location.get().strip())))
              + ", which Spillway does not follow: set the buffer's url to where it points)";
    }
    // 409 too: what a receiver keyed by Idempotency-Key answers while an earlier try of the batch,
    // one that timed out here, is still under way there; rejected, its rows could be deleted
    // before that try's outcome is known.
    if (status == 429 || status >= 500 || status == 408 || status == 409 || status == 425) {
      return new Result.Retry(
          reason,
          retryAfter(headers.firstValue("Retry-After"), headers.firstValue("Date")).orElse(null));
    }
    return Result.reject(reason);
  }

  /**
   * Why a request got no answer, in words: it could not connect, no answer came in time, or what
   * the exception says; the exception's class in brackets.
   */
  private String failure(IOException e) {
    String kind = " (" + e.getClass().getSimpleName() + ")";
    String timeout = DurationText.format(spec.timeout());
    if (e instanceof HttpConnectTimeoutException) {
      return "could not connect within " + timeout + kind;
    }
    if (e instanceof HttpTimeoutException) {
      return noAnswer();
    }
    // The first message along the causes: the JDK's client often leaves its own null.
    String message = Causes.message(e);
    if (e instanceof ConnectException) {
      return "could not connect" + (message == null ? "" : ": " + message) + kind;
    }
    return (message == null ? "no answer" : message) + kind;
  }

  /** A {@code Location} against the url, or as it is when it is no URI. */
  private String resolved(String location) {
    try {
      return spec.url().resolve(location).toString();
    } catch (IllegalArgumentException e) {
      return location;
    }
  }

  /** A call that got no answer: retried. */
  private Result failed(String why) {
    return Result.retry("POST " + spec.shownUrl() + " failed: " + why);
  }

  private String noAnswer() {
    return "no answer within " + DurationText.format(spec.timeout()) + " (HttpTimeoutException)";
  }

  /**
   * {@code Retry-After} as seconds or as an HTTP date in any of its three forms; empty (the backoff
   * then) when absent or unreadable, negative seconds included. A date passed is zero, which the
   * buffer also answers with its backoff. A date is measured from the response's own {@code Date}
   * when it has a readable one, so a receiver whose clock differs from this machine's is still
   * waited for as long as it asked; else from this machine's clock.
   */
  Optional<Duration> retryAfter(Optional<String> header, Optional<String> date) {
    if (header.isEmpty()) {
      return Optional.empty();
    }
    String v = header.get().trim();
    if (DIGITS.matcher(v).matches()) {
      try {
        return Optional.of(Duration.ofSeconds(Long.parseLong(v)));
      } catch (NumberFormatException e) {
        // Only digits: more seconds than a long holds, as long as a wait gets (the buffer's
        // bound applies).
        return Optional.of(Duration.ofSeconds(Long.MAX_VALUE));
      }
    }
    Instant now = clock.instant(); // a date, or nothing readable (negative seconds among them)
    Instant sent = date.flatMap(d -> httpDate(d.trim(), now)).orElse(now);
    return httpDate(v, now)
        .map(at -> Duration.between(sent, at))
        .map(d -> d.isNegative() ? Duration.ZERO : d);
  }

  /**
   * An HTTP date: the RFC 1123 form, or the obsolete RFC 850 form (two-digit year, read as at most
   * 50 years after {@code now}) or asctime form, all in GMT.
   */
  static Optional<Instant> httpDate(String text, Instant now) {
    int year = now.atOffset(ZoneOffset.UTC).getYear();
    DateTimeFormatter rfc850 =
        new DateTimeFormatterBuilder()
            .appendPattern("EEEE, dd-MMM-")
            .appendValueReduced(ChronoField.YEAR, 2, 2, year - 49)
            .appendPattern(" HH:mm:ss 'GMT'")
            .toFormatter(Locale.US);
    for (DateTimeFormatter form : List.of(DateTimeFormatter.RFC_1123_DATE_TIME, rfc850, ASCTIME)) {
      try {
        return Optional.of(
            form == DateTimeFormatter.RFC_1123_DATE_TIME
                ? ZonedDateTime.parse(text, form).toInstant()
                : LocalDateTime.parse(text, form).toInstant(ZoneOffset.UTC));
      } catch (DateTimeParseException notThisForm) {
        // the next form
      }
    }
    return Optional.empty();
  }

  private static String snippet(String body) {
    if (body == null || body.isBlank()) {
      return "";
    }
    return ": " + shortened(body.strip().replaceAll("\\s+", " "));
  }

  /** A receiver's text as a reason shows it: its first 200 characters. */
  private static String shortened(String s) {
    return s.length() > MAX_BODY_IN_REASON ? s.substring(0, MAX_BODY_IN_REASON) + "..." : s;
  }

  /**
   * Keeps the first bytes of a response body, as UTF-8 text, and reads past the rest: only the
   * beginning goes into a reason, and a receiver answering with megabytes costs no more memory.
   * Reading to the end lets the connection be used again.
   */
  static final class BodyHead implements HttpResponse.BodySubscriber<String> {
    private final CompletableFuture<String> body = new CompletableFuture<>();
    private final byte[] kept;
    private int size;

    /** The status and headers the body came with. */
    final HttpResponse.ResponseInfo info;

    BodyHead(int limit, HttpResponse.ResponseInfo info) {
      this.kept = new byte[limit];
      this.info = info;
    }

    @Override
    public CompletionStage<String> getBody() {
      return body;
    }

    @Override
    public void onSubscribe(Flow.Subscription subscription) {
      subscription.request(Long.MAX_VALUE);
    }

    /** The body's kept beginning as read so far. */
    synchronized String soFar() {
      return new String(kept, 0, size, StandardCharsets.UTF_8);
    }

    @Override
    public synchronized void onNext(List<ByteBuffer> buffers) {
      for (ByteBuffer b : buffers) {
        int n = Math.min(b.remaining(), kept.length - size);
        b.get(kept, size, n);
        size += n;
      }
    }

    @Override
    public void onError(Throwable e) {
      body.completeExceptionally(e);
    }

    @Override
    public void onComplete() {
      body.complete(soFar());
    }
  }
}
