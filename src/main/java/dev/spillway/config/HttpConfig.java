package dev.spillway.config;

/**
 * The HTTP port serving {@code /metrics} and {@code /api/status}.
 *
 * @param port 0 picks a free port
 */
public record HttpConfig(int port) {
  public static final int DEFAULT_PORT = 8088;
  static final int MAX_PORT = 65535;

  /**
   * @throws IllegalArgumentException when the port is outside 0..65535
   */
  public HttpConfig {
    if (port < 0 || port > MAX_PORT) {
      throw new IllegalArgumentException("port must be between 0 and " + MAX_PORT + ": " + port);
    }
  }

  public static HttpConfig defaults() {
    return new HttpConfig(DEFAULT_PORT);
  }

  /** The {@code http:} section. */
  static HttpConfig from(ConfigNode n) {
    HttpConfig c = new HttpConfig(n.integer("port", DEFAULT_PORT, 0, MAX_PORT));
    n.finish();
    return c;
  }
}
