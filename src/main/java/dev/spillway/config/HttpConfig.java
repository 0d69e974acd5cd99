package dev.spillway.config;

/**
 * The HTTP port serving {@code /metrics} and {@code /api/status}.
 *
 * @param port 0 picks a free port
 */
public record HttpConfig(int port) {
  public static final int DEFAULT_PORT = 8088;

  public HttpConfig {
    if (port < 0 || port > 65535) {
      throw new IllegalArgumentException("port " + port);
    }
  }

  static HttpConfig from(ConfigNode n) {
    HttpConfig c = new HttpConfig(n.integer("port", DEFAULT_PORT, 0, 65535));
    n.finish();
    return c;
  }
}
