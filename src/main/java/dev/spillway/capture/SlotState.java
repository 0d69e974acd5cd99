package dev.spillway.capture;

import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import javax.sql.DataSource;

/**
 * A replication slot of one database and the WAL it keeps from being recycled.
 *
 * @param heldBytes WAL between the slot's restart position and the current position
 */
public record SlotState(String database, String slot, boolean active, long heldBytes) {

  /** Reads every logical slot of one database. */
  public static List<SlotState> read(String database, DataSource ds) throws SQLException {
    List<SlotState> out = new ArrayList<>();
    try (Connection c = ds.getConnection();
        Statement s = c.createStatement();
        ResultSet rs = s.executeQuery(CaptureStatements.WAL_HELD)) {
      while (rs.next()) {
        out.add(new SlotState(database, rs.getString(1), rs.getBoolean(2), rs.getLong(3)));
      }
    }
    return out;
  }
}
