package dev.spillway.runtime;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

class EmbeddedKafkaTest {
  @Test
  void should_pick_ports_all_different_and_free_again_once_picked() throws Exception {
    int[] ports = EmbeddedKafka.freePorts(8);

    assertThat(Arrays.stream(ports).distinct().count()).isEqualTo(8);
    for (int port : ports) {
      try (ServerSocket socket = new ServerSocket()) {
        socket.setReuseAddress(true);
        socket.bind(new InetSocketAddress("localhost", port));
        assertThat(socket.getLocalPort()).isEqualTo(port);
      }
    }
  }
}
