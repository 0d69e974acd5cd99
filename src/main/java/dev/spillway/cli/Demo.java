package dev.spillway.cli;

import dev.spillway.buffers.BufferSettings;
import dev.spillway.buffers.HandlerSpec;
import dev.spillway.capture.CaptureRoute;
import dev.spillway.capture.ChangeKind;
import dev.spillway.event.TableName;
import dev.spillway.event.Topics;
import dev.spillway.runtime.SpillwayRuntime;
import java.net.URI;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import javax.sql.DataSource;

/**
 * The quickstart's buffer demo in the embedded {@code main} database: a buffer table of contact
 * activity events whose inserts are captured. Re-running adds new rows; nothing is dropped.
 */
final class Demo {
  static final TableName EVENTS = new TableName("public", "contact_activity_events");
  static final String BUFFER = "contact_activity_events";
  static final int EVENTS_INSERTED = 10;

  private final DataSource main;

  Demo(DataSource main) {
    this.main = main;
  }

  void createSchema() throws SQLException {
    try (Connection c = main.getConnection();
        Statement s = c.createStatement()) {
      s.execute(
          "CREATE TABLE IF NOT EXISTS public.contact_activity_events"
              + " (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, contact_id bigint NOT NULL,"
              + " activity text NOT NULL, created_at timestamptz NOT NULL DEFAULT now())");
    }
  }

  /** Batches of a few events, so the demo's ten inserts make several bulk calls. */
  static final int BUFFER_BATCH_SIZE = 4;

  /** The demo buffer: contact activity events delivered to a bulk HTTP endpoint. */
  static BufferSettings buffer(URI endpoint) {
    return BufferSettings.of(
            BUFFER,
            EVENTS,
            SpillwayRuntime.MAIN,
            new HandlerSpec.Http(endpoint, Map.of(), HandlerSpec.Http.DEFAULT_TIMEOUT))
        .withBatching(BUFFER_BATCH_SIZE, Duration.ofSeconds(1));
  }

  static List<CaptureRoute> routes(Topics topics) {
    return List.of(
        new CaptureRoute(
            SpillwayRuntime.MAIN, EVENTS, ChangeKind.INSERT, topics.bufferEvents(BUFFER)));
  }

  /** Single-row inserts, one transaction each, as an application would write them. */
  void insertEvents() throws SQLException {
    String[] activities = {"call", "email", "meeting", "note"};
    try (Connection c = main.getConnection();
        PreparedStatement ps =
            c.prepareStatement(
                "INSERT INTO public.contact_activity_events (contact_id, activity) VALUES (?, ?)")) {
      for (int i = 0; i < EVENTS_INSERTED; i++) {
        ps.setLong(1, 100 + i % 3);
        ps.setString(2, activities[i % activities.length]);
        ps.executeUpdate();
      }
    }
  }
}
