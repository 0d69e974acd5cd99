package dev.spillway.jdbc;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketOption;
import java.util.Map;
import javax.net.SocketFactory;
import jdk.net.ExtendedSocketOptions;
import org.postgresql.PGProperty;

/**
 * The sockets of Spillway's database connections: TCP keepalive probes after {@value #IDLE_SECONDS}
 * s of silence, every {@value #INTERVAL_SECONDS} s, given up after {@value #COUNT} unanswered. A
 * server that vanishes while a statement waits for its answer (a host gone in a failover, a network
 * cut) is noticed within about 25 s, and the statement fails as a lost connection, which the sink
 * retries; without them the statement would wait for the system's keepalive (two hours by default),
 * or for ever, holding its worker. A live server answers the probes while it runs a long statement,
 * which no probe cuts short. The driver names this class in its {@code socketFactory} setting.
 */
public final class KeepaliveSocketFactory extends SocketFactory {
  /**
   * The driver settings that give a connection to {@code database} these sockets; none when its URL
   * names a socket factory of its own (a cloud's proxy, say), which it keeps.
   */
  static Map<String, String> driverSettings(DatabaseEndpoint database) {
    if (database.parsedUrl().containsKey(PGProperty.SOCKET_FACTORY.getName())) {
      return Map.of();
    }
    return Map.of(
        PGProperty.SOCKET_FACTORY.getName(),
        KeepaliveSocketFactory.class.getName(),
        // Else the driver turns the socket's keepalive off again.
        PGProperty.TCP_KEEP_ALIVE.getName(),
        "true");
  }

  static final int IDLE_SECONDS = 10;
  static final int INTERVAL_SECONDS = 5;
  static final int COUNT = 3;

  @Override
  public Socket createSocket() throws IOException {
    return withKeepalive(new Socket());
  }

  @Override
  public Socket createSocket(String host, int port) throws IOException {
    return connected(new InetSocketAddress(host, port), null);
  }

  @Override
  public Socket createSocket(String host, int port, InetAddress localHost, int localPort)
      throws IOException {
    return connected(
        new InetSocketAddress(host, port), new InetSocketAddress(localHost, localPort));
  }

  @Override
  public Socket createSocket(InetAddress host, int port) throws IOException {
    return connected(new InetSocketAddress(host, port), null);
  }

  @Override
  public Socket createSocket(InetAddress address, int port, InetAddress localAddress, int localPort)
      throws IOException {
    return connected(
        new InetSocketAddress(address, port), new InetSocketAddress(localAddress, localPort));
  }

  /** A socket of this factory's, bound to {@code local} when given, connected to {@code to}. */
  private Socket connected(InetSocketAddress to, InetSocketAddress local) throws IOException {
    Socket s = createSocket();
    try {
      if (local != null) {
        s.bind(local);
      }
      s.connect(to);
      return s;
    } catch (IOException e) {
      s.close();
      throw e;
    }
  }

  /** Turns keepalive on, with Spillway's timing where the system lets a socket have its own. */
  static Socket withKeepalive(Socket s) throws IOException {
    s.setKeepAlive(true);
    set(s, ExtendedSocketOptions.TCP_KEEPIDLE, IDLE_SECONDS);
    set(s, ExtendedSocketOptions.TCP_KEEPINTERVAL, INTERVAL_SECONDS);
    set(s, ExtendedSocketOptions.TCP_KEEPCOUNT, COUNT);
    return s;
  }

  private static void set(Socket s, SocketOption<Integer> option, int value) throws IOException {
    if (s.supportedOptions().contains(option)) {
      s.setOption(option, value);
    }
  }
}
