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
 * @param safeBytes how much more WAL may be written before the server invalidates the slot (not
 *     below 0), or null when the server sets no limit ({@code max_slot_wal_keep_size}) or the slot
 *     is invalidated
 * @param invalidation why the server invalidated the slot ({@code wal_removed}, …), or null
 */
public record SlotState(
    String database,
    String slot,
    boolean active,
    long heldBytes,
    Long safeBytes,
    String invalidation) {

  /** Reads every logical slot of one database. */
  public static List<SlotState> read(String database, DataSource ds) throws SQLException {
    List<SlotState> out = new ArrayList<>();
    try (Connection c = ds.getConnection();
        Statement s = c.createStatement();
        ResultSet rs = s.executeQuery(CaptureStatements.WAL_HELD)) {
      while (rs.next()) {
        long safe = rs.getLong(4);
        Long safeBytes = rs.wasNull() ? null : Math.max(0, safe);
        out.add(
            new SlotState(
                database,
                rs.getString(1),
                rs.getBoolean(2),
                rs.getLong(3),
                safeBytes,
                rs.getString(5)));
      }
    }
    return out;
  }
}
