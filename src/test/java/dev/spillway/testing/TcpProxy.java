package dev.spillway.testing;

import dev.spillway.jdbc.DatabaseEndpoint;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A loopback TCP relay in front of a real server, which a test can cut (every connection ended, new
 * ones refused, as when a server goes down) and then open again on the same port.
 */
public final class TcpProxy implements AutoCloseable {
  private final String targetHost;
  private final int targetPort;
  private final int port;
  private final Set<Socket> sockets = ConcurrentHashMap.newKeySet();
  private volatile ServerSocket listener;

  public TcpProxy(String targetHost, int targetPort) {
    this.targetHost = targetHost;
    this.targetPort = targetPort;
    this.port = listen(0);
  }

  /** The port clients connect to. */
  public int port() {
    return port;
  }

  /** The database as reached through this relay, with a pool of {@code poolSize}. */
  public DatabaseEndpoint relaying(DatabaseEndpoint direct, int poolSize) {
    return new DatabaseEndpoint(
        direct.name(),
        direct.url().replace(":" + direct.port() + "/", ":" + port + "/"),
        direct.username(),
        direct.password(),
        poolSize,
        direct.lockTimeout());
  }

  /** Ends every relayed connection and refuses new ones until {@link #open()}. */
  public synchronized void cut() {
    closeQuietly(listener);
    listener = null;
    sockets.forEach(TcpProxy::closeQuietly);
    sockets.clear();
  }

  /** Accepts connections again, on the same port. */
  public synchronized void open() {
    if (listener == null) {
      listen(port);
    }
  }

  private synchronized int listen(int on) {
    try {
      ServerSocket s = new ServerSocket();
      s.setReuseAddress(true);
      s.bind(new InetSocketAddress("127.0.0.1", on));
      listener = s;
      Thread t = new Thread(() -> accept(s), "tcp-proxy-accept");
      t.setDaemon(true);
      t.start();
      return s.getLocalPort();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private void accept(ServerSocket s) {
    while (!s.isClosed()) {
      try {
        Socket client = s.accept();
        sockets.add(client);
        if (s != listener) {
          closeQuietly(client); // accepted as cut() ran: cut too
          continue;
        }
        try {
          Socket server = new Socket(targetHost, targetPort);
          sockets.add(server);
          if (s != listener) {
            closeQuietly(client);
            closeQuietly(server);
            continue;
          }
          pump(client, server);
          pump(server, client);
        } catch (IOException e) {
          closeQuietly(client); // the target refused: the client sees its connection end
        }
      } catch (IOException e) {
        // closed by cut()
      }
    }
  }

  private void pump(Socket from, Socket to) {
    Thread t =
        new Thread(
            () -> {
              try (InputStream in = from.getInputStream();
                  OutputStream out = to.getOutputStream()) {
                in.transferTo(out);
              } catch (IOException e) {
                // one side ended
              } finally {
                closeQuietly(from);
                closeQuietly(to);
              }
            },
            "tcp-proxy-pump");
    t.setDaemon(true);
    t.start();
  }

  private static void closeQuietly(AutoCloseable c) {
    if (c == null) {
      return;
    }
    try {
      c.close();
    } catch (Exception e) {
      // already closed
    }
  }

  @Override
  public void close() {
    cut();
  }
}
