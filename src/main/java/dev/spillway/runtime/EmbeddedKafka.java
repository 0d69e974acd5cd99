package dev.spillway.runtime;

import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import kafka.server.KafkaConfig;
import kafka.server.KafkaRaftServer;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.metadata.storage.Formatter;
import org.apache.kafka.server.common.Feature;
import org.apache.kafka.server.common.MetadataVersion;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A single-node KRaft broker (combined broker and controller) running in this JVM on Kafka's own
 * server classes. Its log directory survives restarts, so topics, committed offsets and the capture
 * offsets continue where they stopped.
 *
 * <p>Not thread-safe: start and close from one thread.
 */
public final class EmbeddedKafka implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(EmbeddedKafka.class);
  private static final int NODE_ID = 1;
  private static final String CONTROLLER_LISTENER = "CONTROLLER";

  private final KafkaRaftServer server;
  private final String bootstrapServers;

  private EmbeddedKafka(KafkaRaftServer server, String bootstrapServers) {
    this.server = server;
    this.bootstrapServers = bootstrapServers;
  }

  /**
   * Formats {@code dataDir} on first use and starts the broker.
   *
   * @param port the client port, or 0 for a free one
   */
  public static EmbeddedKafka start(Path dataDir, int port) throws IOException {
    return start(dataDir, port, Map.of());
  }

  /**
   * Formats {@code dataDir} on first use and starts the broker, with these broker settings over
   * Spillway's (a create-topic policy, say).
   *
   * @param port the client port, or 0 for a free one
   */
  public static EmbeddedKafka start(Path dataDir, int port, Map<String, String> settings)
      throws IOException {
    Files.createDirectories(dataDir);
    int[] free = freePorts(2);
    int brokerPort = port == 0 ? free[0] : port;
    int controllerPort = free[1] == brokerPort ? free[0] : free[1];
    Properties props = brokerProperties(dataDir, brokerPort, controllerPort);
    props.putAll(settings);
    KafkaConfig config = KafkaConfig.fromProps(props, false);
    if (!Files.exists(dataDir.resolve("meta.properties"))) {
      format(dataDir);
    }
    KafkaRaftServer server = new KafkaRaftServer(config, Time.SYSTEM);
    try {
      server.startup();
    } catch (RuntimeException e) {
      server.shutdown();
      throw new IOException(
          "The embedded Kafka broker could not start in " + dataDir + ": " + e.getMessage(), e);
    }
    String bootstrap = "localhost:" + brokerPort;
    log.info("Embedded Kafka broker listening on {} (data in {})", bootstrap, dataDir);
    return new EmbeddedKafka(server, bootstrap);
  }

  public String bootstrapServers() {
    return bootstrapServers;
  }

  @Override
  public void close() {
    server.shutdown();
    server.awaitShutdown();
    log.info("Embedded Kafka broker stopped");
  }

  private static Properties brokerProperties(Path dataDir, int brokerPort, int controllerPort) {
    Properties p = new Properties();
    p.putAll(
        Map.ofEntries(
            Map.entry("process.roles", "broker,controller"),
            Map.entry("node.id", String.valueOf(NODE_ID)),
            Map.entry("controller.quorum.voters", NODE_ID + "@localhost:" + controllerPort),
            Map.entry(
                "listeners",
                "PLAINTEXT://localhost:"
                    + brokerPort
                    + ","
                    + CONTROLLER_LISTENER
                    + "://localhost:"
                    + controllerPort),
            Map.entry("advertised.listeners", "PLAINTEXT://localhost:" + brokerPort),
            Map.entry("controller.listener.names", CONTROLLER_LISTENER),
            Map.entry(
                "listener.security.protocol.map",
                "PLAINTEXT:PLAINTEXT," + CONTROLLER_LISTENER + ":PLAINTEXT"),
            Map.entry("inter.broker.listener.name", "PLAINTEXT"),
            Map.entry("log.dirs", dataDir.toAbsolutePath().toString()),
            // One node: every internal topic has a single replica.
            Map.entry("offsets.topic.replication.factor", "1"),
            Map.entry("offsets.topic.num.partitions", "5"),
            Map.entry("transaction.state.log.replication.factor", "1"),
            Map.entry("transaction.state.log.min.isr", "1"),
            Map.entry("transaction.state.log.num.partitions", "5"),
            Map.entry("share.coordinator.state.topic.replication.factor", "1"),
            Map.entry("share.coordinator.state.topic.min.isr", "1"),
            Map.entry("group.initial.rebalance.delay.ms", "0"),
            // Topics are created explicitly, so a typo in a topic name fails instead of
            // quietly creating a topic nobody reads.
            Map.entry("auto.create.topics.enable", "false"),
            Map.entry("num.partitions", "1"),
            Map.entry("log.flush.interval.messages", String.valueOf(Long.MAX_VALUE))));
    return p;
  }

  private static void format(Path dataDir) throws IOException {
    String dir = dataDir.toAbsolutePath().toString();
    try (PrintStream quiet = new PrintStream(OutputStream.nullOutputStream())) {
      new Formatter()
          .setPrintStream(quiet)
          .setClusterId(Uuid.randomUuid().toString())
          .setNodeId(NODE_ID)
          .addDirectory(dir)
          .setMetadataLogDirectory(dir)
          .setControllerListenerName(CONTROLLER_LISTENER)
          .setReleaseVersion(MetadataVersion.LATEST_PRODUCTION)
          .setSupportedFeatures(Feature.PRODUCTION_FEATURES)
          .setIgnoreFormatted(true)
          .run();
    } catch (IOException e) {
      throw e;
    } catch (Exception e) {
      throw new IOException("Could not format the embedded Kafka log directory " + dir, e);
    }
  }

  /** That many ports free now, each a different one: all are held until the last is picked. */
  static int[] freePorts(int count) throws IOException {
    List<ServerSocket> held = new ArrayList<>();
    try {
      int[] ports = new int[count];
      for (int i = 0; i < count; i++) {
        ServerSocket socket = new ServerSocket();
        held.add(socket);
        socket.setReuseAddress(true);
        socket.bind(new InetSocketAddress("localhost", 0));
        ports[i] = socket.getLocalPort();
      }
      return ports;
    } finally {
      for (ServerSocket socket : held) {
        socket.close();
      }
    }
  }
}
