package dev.spillway.ops;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpHandler;
import com.sun.net.httpserver.HttpServer;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.Optional;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The HTTP port: Prometheus text at {@code /metrics}, the status report as JSON at {@code
 * /api/status}, and, for a browser, the same as a page at {@code /} ({@link Dashboard}). Read-only
 * (GET and HEAD); each request is served on a thread of its own so a slow scrape does not block the
 * status API.
 */
public final class HttpEndpoint implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(HttpEndpoint.class);
  static final ObjectMapper JSON = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);
  private static final String TEXT = "text/plain; charset=utf-8";
  private static final String HTML = "text/html; charset=utf-8";
  private static final String JSON_TYPE = "application/json";
  private static final String PROMETHEUS = "text/plain; version=0.0.4; charset=utf-8";

  /** What a client that is no browser gets at {@code /}, and at a path not found. */
  private static final String INDEX =
      "Spillway\n  /            the dashboard, in a browser\n"
          + "  /metrics     Prometheus metrics\n  /api/status  status as JSON\n"
          + "  /livez       200 while it runs, 503 once a part of it has failed\n";

  private final HttpServer server;
  private final ExecutorService executor;

  private HttpEndpoint(HttpServer server, ExecutorService executor) {
    this.server = server;
    this.executor = executor;
  }

  /**
   * @param port 0 for a free port
   * @param failure why the process stopped working, if a part of it failed
   */
  public static HttpEndpoint start(
      int port,
      PrometheusMeterRegistry registry,
      Supplier<StatusReport> status,
      Supplier<Optional<String>> failure)
      throws IOException {
    HttpEndpoint http = bind(port);
    http.serve(registry, status, failure);
    return http;
  }

  /**
   * The port asked for cannot be taken: another process holds it, or the system refuses it (a port
   * below 1024 without the privilege).
   */
  public static final class PortUnavailableException extends IllegalStateException {
    private final boolean inUse;

    PortUnavailableException(int port, java.net.BindException cause) {
      this(port, cause, inUse(port, cause));
    }

    private PortUnavailableException(int port, java.net.BindException cause, boolean inUse) {
      super(sentence(port, cause, inUse), cause);
      this.inUse = inUse;
    }

    /** Whether another process holds the port, rather than the system refusing it. */
    public boolean inUse() {
      return inUse;
    }

    /**
     * In use, unless the system may have refused it: a port below 1024, whose message does not say
     * it is in use (the system's words, in the process's language).
     */
    private static boolean inUse(int port, java.net.BindException e) {
      return port == 0 || port >= 1024 || String.valueOf(e.getMessage()).contains("in use");
    }

    private static String sentence(int port, java.net.BindException e, boolean inUse) {
      return inUse
          ? "HTTP port " + port + " is already in use; set http.port to a free port (0 picks one)."
          : "HTTP port "
              + port
              + " cannot be taken ("
              + e.getMessage()
              + "); set http.port to another port (0 picks one; one below 1024 needs the"
              + " privilege to bind it).";
    }
  }

  /**
   * Takes the port and serves nothing yet: a start finds a port in use before it starts anything
   * else (a broker, capture), and serves once what it reports on runs ({@link #serve}).
   *
   * @param port 0 for a free port
   * @throws PortUnavailableException when another process holds it, or the system refuses it
   */
  public static HttpEndpoint bind(int port) throws IOException {
    HttpServer server;
    try {
      server = HttpServer.create(new InetSocketAddress(port), 0);
    } catch (java.net.BindException e) {
      throw new PortUnavailableException(port, e);
    }
    // A thread per request being answered: a client that sends half a request and stalls holds
    // only its own, so /livez and /metrics still answer (the server reads a request on the thread
    // that answers it, and waits for it without a limit).
    ExecutorService executor =
        Executors.newCachedThreadPool(
            r -> {
              Thread t = new Thread(r, "spillway-http");
              t.setDaemon(true);
              return t;
            });
    server.setExecutor(executor);
    return new HttpEndpoint(server, executor);
  }

  /**
   * Serves on the bound port.
   *
   * @param failure why the process stopped working, if a part of it failed
   */
  public void serve(
      PrometheusMeterRegistry registry,
      Supplier<StatusReport> reports,
      Supplier<Optional<String>> failure) {
    LatestStatus status = new LatestStatus(reports, failure);
    serve("/metrics", ex -> respond(ex, 200, PROMETHEUS, registry.scrape()));
    serve("/api/status", ex -> respondWithReport(ex, status, JSON_TYPE, JSON::writeValueAsString));
    // For a service manager or an orchestrator's probe: cheap, no database asked.
    serve(
        "/livez",
        ex -> {
          Optional<String> failed = failure.get();
          respond(
              ex,
              failed.isPresent() ? 503 : 200,
              TEXT,
              failed.map(f -> "failed: " + f + "\n").orElse("running\n"));
        });
    serve(
        "/",
        ex -> {
          String accept = ex.getRequestHeaders().getFirst("Accept");
          if (accept != null && accept.contains("text/html")) {
            // A browser: the dashboard.
            respondWithReport(ex, status, HTML, r -> Dashboard.page(r, java.time.Instant.now()));
            return;
          }
          respond(ex, 200, TEXT, INDEX);
        });
    server.start();
    log.info(
        "HTTP endpoint on port {} (the dashboard at /, /metrics, /api/status, /livez)",
        server.getAddress().getPort());
  }

  /**
   * Answers GET and HEAD of {@code path} itself: a longer path the server would hand to its context
   * is not found, and a method that would write is not allowed (every answer here only reads).
   */
  private void serve(String path, HttpHandler handler) {
    server.createContext(
        path,
        ex -> {
          if (!path.equals(ex.getRequestURI().getPath())) {
            respond(ex, 404, TEXT, INDEX);
          } else if (!"GET".equals(ex.getRequestMethod())
              && !"HEAD".equals(ex.getRequestMethod())) {
            ex.getResponseHeaders().set("Allow", "GET, HEAD");
            respond(ex, 405, TEXT, ex.getRequestMethod() + " is not allowed: GET or HEAD.\n");
          } else {
            handler.handle(ex);
          }
        });
  }

  /**
   * The status report, made by one request at a time (it asks each database, which may be slow to
   * answer or out of reach): requests meanwhile get the last one made, or none before the first, so
   * dashboards reloading and scripts polling never hold the endpoint's threads, and {@code /livez}
   * and {@code /metrics} answer. The last one tells of a failure as of now, though: {@code status}
   * exits 1 on it.
   */
  private static final class LatestStatus {
    private final Supplier<StatusReport> reports;
    private final Supplier<Optional<String>> failure;
    private final ReentrantLock making = new ReentrantLock();
    private volatile StatusReport last;

    LatestStatus(Supplier<StatusReport> reports, Supplier<Optional<String>> failure) {
      this.reports = reports;
      this.failure = failure;
    }

    /** A new report, or while one is being made the last one; empty before the first. */
    Optional<StatusReport> get() {
      if (!making.tryLock()) {
        return Optional.ofNullable(last).map(r -> r.withFailure(failure.get().orElse(null)));
      }
      try {
        StatusReport made = reports.get();
        last = made;
        return Optional.of(made);
      } finally {
        making.unlock();
      }
    }
  }

  /** How a status report is written out. */
  @FunctionalInterface
  private interface Render {
    String apply(StatusReport report) throws IOException;
  }

  /** Answers with the status report rendered, or, before the first is made, says so (503). */
  private static void respondWithReport(
      HttpExchange ex, LatestStatus status, String type, Render render) throws IOException {
    Optional<StatusReport> report = status.get();
    if (report.isEmpty()) {
      respond(
          ex,
          503,
          TEXT,
          "The first status report is still being made (a database slow to answer?); ask again"
              + " in a moment.\n");
      return;
    }
    respond(ex, 200, type, render.apply(report.get()));
  }

  public int port() {
    return server.getAddress().getPort();
  }

  private static void respond(HttpExchange ex, int code, String type, String body)
      throws IOException {
    ex.getResponseHeaders().set("Content-Type", type);
    if ("HEAD".equals(ex.getRequestMethod())) {
      ex.sendResponseHeaders(code, -1); // the headers alone
      ex.close();
      return;
    }
    byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
    ex.sendResponseHeaders(code, bytes.length);
    try (OutputStream out = ex.getResponseBody()) {
      out.write(bytes);
    }
  }

  @Override
  public void close() {
    server.stop(0);
    executor.shutdownNow();
  }
}
