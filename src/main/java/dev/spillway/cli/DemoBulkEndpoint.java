package dev.spillway.cli;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The quickstart's stand-in for a CRM's bulk API: a local HTTP endpoint that accepts a JSON array
 * per call and counts the calls, the rows per call and the distinct idempotency keys.
 */
final class DemoBulkEndpoint implements AutoCloseable {
  private static final ObjectMapper JSON = new ObjectMapper();

  private final HttpServer server;
  private final List<Integer> rowsPerCall = new ArrayList<>();
  private final Set<String> keys = ConcurrentHashMap.newKeySet();

  private DemoBulkEndpoint(HttpServer server) {
    this.server = server;
  }

  static DemoBulkEndpoint start() throws IOException {
    HttpServer server =
        HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
    DemoBulkEndpoint endpoint = new DemoBulkEndpoint(server);
    server.createContext("/bulk", endpoint::handle);
    server.start();
    return endpoint;
  }

  URI url() {
    return URI.create(
        "http://"
            + server.getAddress().getHostString()
            + ":"
            + server.getAddress().getPort()
            + "/bulk");
  }

  private void handle(HttpExchange exchange) throws IOException {
    try (exchange;
        InputStream body = exchange.getRequestBody()) {
      int rows = JSON.readTree(body).size();
      String key = exchange.getRequestHeaders().getFirst("Idempotency-Key");
      synchronized (this) {
        rowsPerCall.add(rows);
      }
      if (key != null) {
        keys.add(key);
      }
      exchange.sendResponseHeaders(204, -1);
    }
  }

  synchronized List<Integer> rowsPerCall() {
    return List.copyOf(rowsPerCall);
  }

  synchronized int rows() {
    return rowsPerCall.stream().mapToInt(Integer::intValue).sum();
  }

  int distinctKeys() {
    return keys.size();
  }

  @Override
  public void close() {
    server.stop(0);
  }
}
