package dev.spillway.capture;

import dev.spillway.event.TableName;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;
import javax.sql.DataSource;

/**
 * Checks a source database before capture starts and prepares what capture owns there: the {@code
 * spillway} schema, the heartbeat table and the publication. Checks run first and change nothing;
 * each failure is one sentence.
 */
final class SourcePreparation {
  private SourcePreparation() {}

  /** Throws {@link CaptureSetupException} when the database cannot be captured as planned. */
  static void check(String database, DataSource ds, Collection<TableName> tables) {
    try (Connection c = ds.getConnection()) {
      String walLevel = single(c, CaptureStatements.WAL_LEVEL);
      if (!"logical".equals(walLevel)) {
        throw new CaptureSetupException(
            "Database "
                + database
                + " runs with wal_level="
                + walLevel
                + "; change capture needs wal_level=logical (set it in postgresql.conf and restart"
                + " the server).");
      }
      if (!"t".equals(single(c, CaptureStatements.CAN_REPLICATE))) {
        throw new CaptureSetupException(
            "Role "
                + c.getMetaData().getUserName()
                + " of database "
                + database
                + " may not stream changes; grant it with ALTER ROLE "
                + TableName.quote(c.getMetaData().getUserName())
                + " REPLICATION.");
      }
      for (TableName t : tables) {
        Long oid = tableOid(c, t);
        if (oid == null) {
          throw new CaptureSetupException(
              "Table " + t + " does not exist in database " + database + ".");
        }
        try (PreparedStatement ps = c.prepareStatement(CaptureStatements.HAS_PRIMARY_KEY)) {
          ps.setLong(1, oid);
          try (ResultSet rs = ps.executeQuery()) {
            if (!rs.next()) {
              throw new CaptureSetupException(
                  "Table "
                      + t
                      + " in database "
                      + database
                      + " has no primary key; captured tables need one.");
            }
          }
        }
      }
    } catch (SQLException e) {
      throw new CaptureSetupException(
          "Could not check database " + database + " for capture: " + e.getMessage(), e);
    }
  }

  /** Creates or updates the schema, heartbeat table and publication. Idempotent. */
  static void prepare(
      String publication, DataSource ds, Collection<TableName> tables, Set<ChangeKind> kinds)
      throws SQLException {
    try (Connection c = ds.getConnection();
        Statement s = c.createStatement()) {
      s.execute(CaptureStatements.CREATE_SCHEMA);
      s.execute(CaptureStatements.CREATE_HEARTBEAT);
      List<String> published = new ArrayList<>();
      tables.forEach(t -> published.add(t.quoted()));
      published.add(TableName.parse(CaptureStatements.HEARTBEAT_TABLE).quoted());
      String tableList = String.join(", ", published);
      // Only the kinds some route needs leave the server: a database holding buffer tables alone
      // does not stream the deletes that drain them. A partition's changes come as its root.
      String actions =
          kinds.stream().map(ChangeKind::publishAction).collect(Collectors.joining(", "));
      String options = "publish = '" + actions + "', publish_via_partition_root = true";
      String name = TableName.quote(publication);
      if (exists(c, CaptureStatements.PUBLICATION_EXISTS, publication)) {
        // One transaction: a change committed between the two would be decoded with the tables
        // of one and the actions of the other.
        c.setAutoCommit(false);
        try {
          s.execute("ALTER PUBLICATION " + name + " SET TABLE " + tableList);
          s.execute("ALTER PUBLICATION " + name + " SET (" + options + ")");
          c.commit();
        } catch (SQLException e) {
          c.rollback();
          throw e;
        } finally {
          c.setAutoCommit(true);
        }
      } else {
        s.execute(
            "CREATE PUBLICATION " + name + " FOR TABLE " + tableList + " WITH (" + options + ")");
      }
    }
  }

  /**
   * Whether no process streams from the slot (or it does not exist), waiting up to {@code within}
   * for one that just disconnected to be let go by the server.
   */
  static boolean slotReleased(DataSource ds, String slot, Duration within)
      throws SQLException, InterruptedException {
    long deadline = System.nanoTime() + within.toNanos();
    while (slotActive(ds, slot)) {
      if (System.nanoTime() > deadline) {
        return false;
      }
      Thread.sleep(50);
    }
    return true;
  }

  static boolean slotActive(DataSource ds, String slot) throws SQLException {
    try (Connection c = ds.getConnection();
        PreparedStatement ps = c.prepareStatement(CaptureStatements.SLOT_ACTIVE)) {
      ps.setString(1, slot);
      try (ResultSet rs = ps.executeQuery()) {
        return rs.next() && rs.getBoolean(1);
      }
    }
  }

  private static Long tableOid(Connection c, TableName t) throws SQLException {
    try (PreparedStatement ps = c.prepareStatement(CaptureStatements.TABLE_OID)) {
      ps.setString(1, t.quoted());
      try (ResultSet rs = ps.executeQuery()) {
        rs.next();
        long oid = rs.getLong(1);
        return rs.wasNull() ? null : oid;
      }
    }
  }

  private static boolean exists(Connection c, String sql, String arg) throws SQLException {
    try (PreparedStatement ps = c.prepareStatement(sql)) {
      ps.setString(1, arg);
      try (ResultSet rs = ps.executeQuery()) {
        return rs.next();
      }
    }
  }

  private static String single(Connection c, String sql) throws SQLException {
    try (Statement s = c.createStatement();
        ResultSet rs = s.executeQuery(sql)) {
      rs.next();
      return rs.getString(1);
    }
  }
}
