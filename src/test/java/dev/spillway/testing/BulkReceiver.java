package dev.spillway.testing;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.function.Function;

/**
 * A real HTTP endpoint on localhost standing in for a bulk API: it records every call (rows,
 * headers, arrival time) and answers what the test scripts for the n-th call.
 */
public final class BulkReceiver implements AutoCloseable {
  private static final ObjectMapper JSON = new ObjectMapper();

  /**
   * One call as received.
   *
   * @param headers the first value of each request header, by its name in lower case
   */
  public record Call(Map<String, String> headers, List<Map<String, Object>> rows, long atNanos) {
    public String idempotencyKey() {
      return headers.get("idempotency-key");
    }
  }

  /** What to answer. */
  public record Answer(int status, Map<String, String> headers, String body) {
    public static Answer ok() {
      return new Answer(200, Map.of(), "{}");
    }

    public static Answer status(int status) {
      return new Answer(status, Map.of(), "status " + status);
    }
  }

  private final HttpServer server;
  private final ExecutorService executor = Executors.newCachedThreadPool();
  private final List<Call> calls = new CopyOnWriteArrayList<>();
  private volatile Function<Integer, Answer> script = n -> Answer.ok();

  public BulkReceiver() {
    try {
      server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    server.createContext("/bulk", this::handle);
    server.setExecutor(executor);
    server.start();
  }

  /** Answers by call number (0 for the first call). */
  public BulkReceiver answering(Function<Integer, Answer> script) {
    this.script = script;
    return this;
  }

  public URI url() {
    return URI.create("http://127.0.0.1:" + server.getAddress().getPort() + "/bulk");
  }

  public List<Call> calls() {
    return List.copyOf(calls);
  }

  public int rows() {
    return calls.stream().mapToInt(c -> c.rows().size()).sum();
  }

  private void handle(HttpExchange exchange) throws IOException {
    try (exchange) {
      List<Map<String, Object>> rows =
          JSON.readValue(exchange.getRequestBody(), new TypeReference<>() {});
      int n;
      synchronized (calls) {
        n = calls.size();
        Map<String, String> headers = new HashMap<>();
        exchange
            .getRequestHeaders()
            .forEach((name, values) -> headers.put(name.toLowerCase(Locale.ROOT), values.get(0)));
        calls.add(new Call(Map.copyOf(headers), rows, System.nanoTime()));
      }
      Answer a = script.apply(n);
      a.headers().forEach((k, v) -> exchange.getResponseHeaders().add(k, v));
      byte[] body = a.body().getBytes(StandardCharsets.UTF_8);
      exchange.sendResponseHeaders(a.status(), body.length == 0 ? -1 : body.length);
      if (body.length > 0) {
        exchange.getResponseBody().write(body);
      }
    }
  }

  @Override
  public void close() {
    server.stop(0);
    executor.shutdownNow();
  }
}
