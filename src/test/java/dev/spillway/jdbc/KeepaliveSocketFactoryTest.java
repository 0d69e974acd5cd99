package dev.spillway.jdbc;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import jdk.net.ExtendedSocketOptions;
import org.junit.jupiter.api.Test;

class KeepaliveSocketFactoryTest {
  @Test
  void should_give_every_socket_it_makes_keepalive_with_its_timing() throws Exception {
    KeepaliveSocketFactory factory = new KeepaliveSocketFactory();
    try (ServerSocket server = new ServerSocket(0, 10, InetAddress.getLoopbackAddress());
        Socket unconnected = factory.createSocket();
        Socket byName = factory.createSocket("localhost", server.getLocalPort());
        Socket byAddress =
            factory.createSocket(InetAddress.getLoopbackAddress(), server.getLocalPort())) {
      for (Socket s : new Socket[] {unconnected, byName, byAddress}) {
        assertThat(s.getKeepAlive()).isTrue();
        if (s.supportedOptions().contains(ExtendedSocketOptions.TCP_KEEPIDLE)) {
          assertThat(s.getOption(ExtendedSocketOptions.TCP_KEEPIDLE)).isEqualTo(10);
          assertThat(s.getOption(ExtendedSocketOptions.TCP_KEEPINTERVAL)).isEqualTo(5);
          assertThat(s.getOption(ExtendedSocketOptions.TCP_KEEPCOUNT)).isEqualTo(3);
        }
      }
    }
  }
}
