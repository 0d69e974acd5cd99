package dev.spillway.cli;

import dev.spillway.buffers.BufferPipeline;
import dev.spillway.capture.Capture;
import dev.spillway.capture.CaptureRoute;
import dev.spillway.config.ConfigException;
import dev.spillway.config.SpillwayConfig;
import dev.spillway.event.BufferEvent;
import dev.spillway.event.EventSerdes;
import dev.spillway.event.TableName;
import dev.spillway.event.Topics;
import dev.spillway.lfk.LfkPipeline;
import dev.spillway.lfk.LfkSettings;
import dev.spillway.ops.HttpEndpoint;
import dev.spillway.ops.TopicTail;
import dev.spillway.runtime.SpillwayRuntime;
import dev.spillway.runtime.WorkingDirectory;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.stream.Collectors;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParentCommand;
import picocli.CommandLine.Spec;

/**
 * {@code spillway quickstart}: everything embedded, demo data, the captured records shown per
 * topic. Uses the configuration's working directory and HTTP port but never its Kafka or databases:
 * the demo writes only to embedded ones.
 */
@Command(
    name = "quickstart",
    description = "Start embedded PostgreSQL and Kafka, run the demo and show what was captured.")
final class QuickstartCommand implements Callable<Integer> {
  private static final Duration DEADLINE = Duration.ofSeconds(60);

  @ParentCommand SpillwayCommand root;
  @Spec CommandSpec spec;

  @Option(names = "--keep-running", description = "Keep running after the demo until stopped.")
  boolean keepRunning;

  @Override
  public Integer call() throws Exception {
    PrintWriter out = spec.commandLine().getOut();
    SpillwayConfig config = Launch.config(root).embedded();
    if (WorkingDirectory.embeddedRun(config.workingDir())) {
      // Its demo would take over run's slot and publication and consume its topics as the same
      // consumer groups, dead-lettering the work run left waiting there.
      throw new ConfigException(
          config.sourceName(),
          null,
          "working-dir",
          "is "
              + config.workingDir()
              + ", where 'run' keeps its embedded PostgreSQL or Kafka, whose replication slot,"
              + " topics and consumer groups the quickstart would take over: give the quickstart a"
              + " working directory of its own (working-dir: in another configuration file), or"
              + " delete "
              + config.workingDir().resolve(WorkingDirectory.EMBEDDED_RUN_FILE)
              + " to let it take them over");
    }
    // The demo runs on its own definitions with the configured settings; the section is checked
    // whole, as run checks it, before anything starts.
    LfkSettings lfkSettings = LfkStartup.settings(config);
    long t0 = System.nanoTime();
    out.printf("Starting embedded PostgreSQL and Kafka in %s ...%n", config.workingDir());
    out.flush();
    SpillwayRuntime runtime;
    try {
      runtime = SpillwayRuntime.start(config, Set.of(LfkDemo.CI), Clock.systemUTC());
    } catch (HttpEndpoint.PortUnavailableException e) {
      // Taking the port comes first, so nothing was started. A demo need not fail for a port a
      // running Spillway holds: `status` finds this process through its working directory.
      out.printf(
          "  HTTP port %d %s: the quickstart takes a free one.%n",
          config.http().port(), e.inUse() ? "is in use" : "cannot be taken");
      runtime =
          SpillwayRuntime.start(config.withHttpPort(0), Set.of(LfkDemo.CI), Clock.systemUTC());
    }
    DemoBulkEndpoint endpoint;
    try {
      endpoint = DemoBulkEndpoint.start();
    } catch (IOException | RuntimeException | Error e) {
      runtime.close();
      throw e;
    }
    boolean kept = false; // handed to UntilStopped, which closes the runtime
    try {
      out.printf(
          "  ready in %.1f s: Kafka at %s, dashboard at http://localhost:%d/%n",
          seconds(t0), runtime.bootstrapServers(), runtime.httpPort());
      Demo demo = new Demo(runtime.databases().dataSource(SpillwayRuntime.MAIN));
      demo.createSchema();
      LfkDemo lfkDemo =
          new LfkDemo(
              runtime.databases().dataSource(SpillwayRuntime.MAIN),
              runtime.databases().dataSource(LfkDemo.CI));
      lfkDemo.createSchema();
      Topics topics = runtime.topics();
      Path definitions = LfkDemo.writeDefinitions(config.workingDir());
      LfkPipeline lfk =
          LfkStartup.start(
              runtime,
              lfkSettings,
              LfkStartup.definitions(definitions),
              t -> LfkDemo.TABLES.getOrDefault(TableName.parse(t).toString(), SpillwayRuntime.MAIN),
              out);
      BufferPipeline buffers = BufferPipeline.of(List.of(Demo.buffer(endpoint.url())));
      buffers.start(runtime, Clock.systemUTC());
      List<CaptureRoute> routes = new ArrayList<>(Demo.routes(topics));
      routes.addAll(buffers.routes(topics));
      routes.addAll(lfk.routes(topics));
      // Run as the runtime stops, after capture and before the databases: database ci is the
      // demo's alone, and its slot left behind would hold the embedded server's WAL while a later
      // run captures main.
      runtime.closeWith(new ForgetDemoSlot(runtime));
      long t1 = System.nanoTime();
      runtime.startCapture(routes);
      out.printf("Capture streaming from databases main and ci in %.1f s%n", seconds(t1));
      out.flush();
      List<String> shown = List.of(topics.bufferEvents(Demo.BUFFER));
      try (TopicTail tail =
          new TopicTail(runtime.bootstrapServers(), config.kafka().properties(), shown)) {
        out.printf("Demo: %d single-row inserts into %s%n", Demo.EVENTS_INSERTED, Demo.EVENTS);
        out.flush();
        demo.insertEvents();
        show(tail, topics, out);
      }
      showBulkCalls(endpoint, runtime, out);
      lfkDemo(lfkDemo, out);
      if (keepRunning) {
        kept = true;
        return UntilStopped.await(runtime, out);
      }
      out.println(
          "Done. 'bin/spillway quickstart --keep-running' keeps it up for 'status' and the"
              + " dashboard.");
      return ErrorHandler.OK;
    } finally {
      // A demo that failed is stopped with --keep-running too, not left to the process's exit.
      if (!kept) {
        runtime.close();
      }
      endpoint.close();
    }
  }

  /**
   * Drops the demo's ci slot and publication as the runtime stops (its name in a failure's log).
   */
  private record ForgetDemoSlot(SpillwayRuntime runtime) implements AutoCloseable {
    @Override
    public void close() throws Exception {
      Capture.forget(
          runtime.databases().dataSource(LfkDemo.CI),
          runtime.captureSettings().slotName(LfkDemo.CI));
    }
  }

  /** Deletes projects and follows their children until all are cleaned up. */
  private static void lfkDemo(LfkDemo demo, PrintWriter out) throws Exception {
    LfkDemo.Data data = demo.createData();
    Map<String, Long> before = demo.remaining(data);
    out.printf(
        "Loose foreign keys: %d projects, each with 100 merge requests and 10 packages (main),"
            + " 20 pipelines of 50 builds (ci);%n  deleting %d projects, then waiting for their"
            + " children (rows left per child):%n",
        LfkDemo.PROJECTS, LfkDemo.DELETED);
    out.flush();
    long started = System.nanoTime();
    demo.deleteProjects(data);
    if (!demo.follow(data, out, DEADLINE)) {
      throw new IllegalStateException(
          "The demo's children were not all cleaned up within " + DEADLINE.toSeconds() + " s.");
    }
    out.printf(
        "  cleaned up %.1f s after the delete: %d merge requests, %d pipelines and %d builds"
            + " deleted, %d head pipelines nullified, %d packages set to status 4%n%n",
        seconds(started),
        before.get("merge_requests"),
        before.get("ci_pipelines"),
        before.get("ci_builds"),
        before.get("head_pipeline_id"),
        before.get("packages"));
    out.flush();
  }

  /** Waits until the demo endpoint received every inserted row, then shows its bulk calls. */
  private static void showBulkCalls(
      DemoBulkEndpoint endpoint, SpillwayRuntime runtime, PrintWriter out) throws Exception {
    long deadline = System.nanoTime() + DEADLINE.toNanos();
    long left = Long.MAX_VALUE;
    while (System.nanoTime() < deadline) {
      left = rowsLeft(runtime);
      if (endpoint.rows() >= Demo.EVENTS_INSERTED && left == 0) {
        break;
      }
      Thread.sleep(50);
    }
    out.printf(
        "Buffer %s: %d rows delivered to %s in %d bulk calls (rows per call: %s; %d distinct"
            + " Idempotency-Keys); %d rows left in the table%n%n",
        Demo.BUFFER,
        endpoint.rows(),
        endpoint.url(),
        endpoint.rowsPerCall().size(),
        endpoint.rowsPerCall().stream().map(String::valueOf).collect(Collectors.joining(", ")),
        endpoint.distinctKeys(),
        left);
    out.flush();
    if (endpoint.rows() < Demo.EVENTS_INSERTED || left != 0) {
      throw new IllegalStateException(
          "The demo's buffered rows were not all delivered within " + DEADLINE.toSeconds() + " s.");
    }
  }

  private static long rowsLeft(SpillwayRuntime runtime) throws java.sql.SQLException {
    try (java.sql.Connection c =
            runtime.databases().dataSource(SpillwayRuntime.MAIN).getConnection();
        java.sql.Statement s = c.createStatement();
        java.sql.ResultSet rs = s.executeQuery("SELECT count(*) FROM " + Demo.EVENTS.quoted())) {
      rs.next();
      return rs.getLong(1);
    }
  }

  private static void show(TopicTail tail, Topics topics, PrintWriter out) {
    List<ConsumerRecord<byte[], byte[]>> inserts = new ArrayList<>();
    long deadline = System.nanoTime() + DEADLINE.toNanos();
    while (inserts.size() < Demo.EVENTS_INSERTED && System.nanoTime() < deadline) {
      inserts.addAll(tail.poll(Duration.ofMillis(200)));
    }
    out.printf("%nTopic %s: %d records%n", topics.bufferEvents(Demo.BUFFER), inserts.size());
    for (ConsumerRecord<byte[], byte[]> r : inserts) {
      BufferEvent e = EventSerdes.decodeBufferEvent(r.value());
      out.printf(
          "  %s inserted id=%s contact_id=%s activity=%s  (in Kafka %d ms after commit)%n",
          e.table(),
          e.row().get("id"),
          e.row().get("contact_id"),
          e.row().get("activity"),
          latencyMillis(r, e.commitTimeMicros()));
    }
    out.println();
    out.flush();
    if (inserts.size() < Demo.EVENTS_INSERTED) {
      throw new IllegalStateException(
          "The demo's changes did not all reach Kafka within " + DEADLINE.toSeconds() + " s.");
    }
  }

  private static long latencyMillis(ConsumerRecord<?, ?> r, long commitMicros) {
    return Math.max(0, r.timestamp() - commitMicros / 1000);
  }

  private static double seconds(long since) {
    return (System.nanoTime() - since) / 1e9;
  }
}
