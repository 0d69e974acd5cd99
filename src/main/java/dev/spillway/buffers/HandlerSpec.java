package dev.spillway.buffers;

import dev.spillway.config.DurationText;
import java.net.URI;
import java.time.Duration;
import java.util.Map;
import java.util.Objects;

/** Which bulk handler a buffer runs, as configured: exactly one of these. */
public sealed interface HandlerSpec {
  /**
   * POST of a JSON array to a URL.
   *
   * @param headers sent with every request, after {@code Content-Type} and before {@code
   *     Idempotency-Key}
   * @param timeout of one request, connection included
   */
  record Http(URI url, Map<String, String> headers, Duration timeout) implements HandlerSpec {
    public static final Duration DEFAULT_TIMEOUT = Duration.ofSeconds(10);

    public Http {
      Objects.requireNonNull(url, "url");
      headers = Map.copyOf(headers);
      Objects.requireNonNull(timeout, "timeout");
    }

    /**
     * The url as logs, reasons and dead letters show it: without its query and fragment, which may
     * carry a token ({@code ?api_key=…}), {@code ?…} standing for the query.
     */
    public String shownUrl() {
      return shown(url.toString());
    }

    /** A URL, or where a redirect points, as {@link #shownUrl()} shows one. */
    static String shown(String url) {
      int query = url.indexOf('?');
      int fragment = url.indexOf('#');
      if (query >= 0 && (fragment < 0 || query < fragment)) {
        return url.substring(0, query) + "?…";
      }
      return fragment < 0 ? url : url.substring(0, fragment);
    }

    @Override
    public String toString() {
      // Header values often carry credentials, and so may the query.
      return "http "
          + shownUrl()
          + " (headers "
          + headers.keySet()
          + ", timeout "
          + DurationText.format(timeout)
          + ")";
    }
  }

  /**
   * One statement per batch in the buffer's database, with {@code :ids} bound to the array of the
   * batch's ids and {@code :group_id} (optional) to its group id.
   *
   * @param timeout how long the statement may run, lock waits included, before PostgreSQL cancels
   *     it (a failed call, retried); zero for no limit
   */
  record Sql(String statement, Duration timeout) implements HandlerSpec {
    public Sql {
      Objects.requireNonNull(statement, "statement");
      Objects.requireNonNull(timeout, "timeout");
    }

    public Sql(String statement) {
      this(statement, Duration.ZERO);
    }

    @Override
    public String toString() {
      return "sql "
          + statement.strip().replaceAll("\\s+", " ")
          + (timeout.isZero() ? "" : " (timeout " + DurationText.format(timeout) + ")");
    }
  }

  /**
   * A class on the class path implementing {@link BulkHandler} with a public no-argument
   * constructor.
   */
  record JavaClass(Class<? extends BulkHandler> type) implements HandlerSpec {
    public JavaClass {
      Objects.requireNonNull(type, "type");
    }

    @Override
    public String toString() {
      return "class " + type.getName();
    }
  }
}
