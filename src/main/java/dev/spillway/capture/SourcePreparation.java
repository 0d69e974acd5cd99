package dev.spillway.capture;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.spillway.event.TableName;
import dev.spillway.jdbc.Transactions;
import dev.spillway.jdbc.WithoutLockTimeout;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Savepoint;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Checks a source database before capture starts and prepares what capture owns there: the {@code
 * spillway} schema, the heartbeat table and the publication. Checks run first and change nothing;
 * each failure is one sentence.
 */
final class SourcePreparation {
  private static final Logger log = LoggerFactory.getLogger(SourcePreparation.class);

  private static final ObjectMapper JSON = new ObjectMapper();

  /** How long start-up waits to lock a newly published table against inserts. */
  private static final Duration LOCK_WAIT = Duration.ofSeconds(2);

  /**
   * How long a table joining later waits for its lock at each try: the inserts queued behind the
   * request wait as long, once a second while a long transaction keeps the table.
   */
  private static final Duration JOIN_LOCK_WAIT = Duration.ofMillis(100);

  private static final String LOCK_NOT_AVAILABLE = "55P03";

  /** How long a slot's condition may take to read before the check tries again later. */
  private static final int SLOT_QUERY_TIMEOUT_SECONDS = 10;

  /**
   * What a new slot recovers of the changes a lost one did not stream: buffer tables are read again
   * by snapshot; deletes are gone, but the sweep finds the children they left.
   */
  static final String AFTER_A_LOST_SLOT =
      "rows then in buffer tables are read again, and 'bin/spillway lfk sweep' finds the children"
          + " of loose-foreign-key parents deleted meanwhile";

  private SourcePreparation() {}

  /**
   * Throws {@link CaptureSetupException} when the database cannot be captured as planned.
   *
   * @param deleted the tables whose deletes capture publishes (loose-foreign-key parents): each
   *     needs its primary key in its deletes; and when there are any, PostgreSQL refuses every
   *     DELETE on a published table without a replica identity
   */
  static void check(
      String database, DataSource ds, Collection<TableName> tables, Set<TableName> deleted) {
    boolean deletes = !deleted.isEmpty();
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
      // Its slots are not the primary's: the positions kept for the primary's slot would be
      // cleared and a slot made where capture does not stream from.
      requirePrimary(c, database);
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
      Map<Long, TableName> captured = new LinkedHashMap<>();
      for (TableName t : tables) {
        Long oid = tableOid(c, t);
        if (oid == null) {
          throw new CaptureSetupException(
              "Table " + t + " does not exist in database " + database + ".");
        }
        captured.put(oid, t);
      }
      for (Map.Entry<Long, TableName> e : captured.entrySet()) {
        long oid = e.getKey();
        TableName t = e.getValue();
        TableName root = capturedAncestor(c, oid, captured);
        if (root != null) {
          throw new CaptureSetupException(
              "Table "
                  + t
                  + " in database "
                  + database
                  + " is a partition of "
                  + root
                  + ", which is captured too: capture reads a partition's changes as its"
                  + " captured root's, so none would reach "
                  + t
                  + "'s own definitions or buffer; nothing was changed: name only "
                  + root
                  + " (one on the root covers its partitions), or only partitions.");
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
        Found bare = deletes ? found(c, CaptureStatements.WITHOUT_IDENTITY, oid) : null;
        if (bare != null) {
          throw new CaptureSetupException(
              bare.subject(t, database)
                  + " has no replica identity (REPLICA IDENTITY NOTHING, or its identity"
                  + " index dropped): once capture publishes the database's"
                  + " deletes (for its loose-foreign-key parents), PostgreSQL refuses every"
                  + " DELETE on it; nothing was changed: give it a replica identity (ALTER"
                  + " TABLE "
                  + bare.name()
                  + " REPLICA IDENTITY DEFAULT).");
        }
        Found keyless =
            deleted.contains(t) ? found(c, CaptureStatements.IDENTITY_WITHOUT_KEY, oid) : null;
        if (keyless != null) {
          throw new CaptureSetupException(
              keyless.subject(t, database)
                  + " has its replica identity on index "
                  + keyless.index()
                  + ", which leaves out its primary key: its deletes would reach capture"
                  + " without the key whose children to clean up; nothing was changed: give"
                  + " it the primary key's identity (ALTER TABLE "
                  + keyless.name()
                  + " REPLICA IDENTITY DEFAULT).");
        }
      }
    } catch (SQLException e) {
      throw CaptureSetupException.of(
          "Could not check database " + database + " for capture: " + e.getMessage(), e);
    }
  }

  /** A table, or one of its partitions, a check found: its name, and the index it names. */
  private record Found(String name, boolean partition, String index) {

    /** What a sentence about it begins with: the table, and the partition when it is one. */
    String subject(TableName table, String database) {
      return "Table "
          + table
          + " in database "
          + database
          + (partition ? " has a partition, " + name + ", that" : "");
    }
  }

  /**
   * The table or partition {@code sql} finds for the table of {@code oid}, given as each of its
   * three parameters, or null: its name, whether a partition, and an index when it names one.
   */
  private static Found found(Connection c, String sql, long oid) throws SQLException {
    try (PreparedStatement ps = c.prepareStatement(sql)) {
      for (int i = 1; i <= 3; i++) {
        ps.setLong(i, oid);
      }
      try (ResultSet rs = ps.executeQuery()) {
        if (!rs.next()) {
          return null;
        }
        return new Found(
            rs.getString(1),
            rs.getBoolean(2),
            rs.getMetaData().getColumnCount() > 2 ? rs.getString(3) : null);
      }
    }
  }

  /**
   * Creates or updates the schema, heartbeat and signal tables and the publication, and in the same
   * transaction asks for a snapshot of {@code snapshot} (when not empty): a crash cannot leave a
   * table published whose earlier rows were not asked for. Idempotent.
   *
   * <p>Each table of {@code snapshot} is locked against writes first (within {@link #LOCK_WAIT}),
   * so a row committed before the publication changes is seen by the snapshot and one committed
   * after it is in the stream. A table that cannot be locked in time may hold rows of transactions
   * still open, written before it joins the publication: the stream would never carry them, and a
   * snapshot read before they commit would not see them. Such a table is left out of the
   * publication, to {@link #join} it once it can be locked; a start meanwhile finds it unpublished
   * and tries again.
   *
   * @return the tables of {@code snapshot} a snapshot was asked for (those holding rows), and those
   *     left to join later
   * @throws CaptureSetupException for a table to join later whose rows Debezium cannot be asked to
   *     read, before anything is changed
   */
  static Asked prepare(
      String publication,
      String owner,
      DataSource ds,
      Collection<TableName> tables,
      Set<ChangeKind> kinds,
      List<TableName> inserted,
      List<TableName> snapshot)
      throws SQLException {
    try (Connection c = ds.getConnection();
        Statement s = c.createStatement()) {
      s.execute(CaptureStatements.CREATE_SCHEMA);
      s.execute(CaptureStatements.CREATE_HEARTBEAT);
      s.execute(CaptureStatements.CREATE_RELEASES);
      s.execute(CaptureStatements.CREATE_REREADS);
      s.execute(CaptureStatements.CREATE_BUFFERED);
      String signals = CaptureStatements.signalTable(publication);
      s.execute(CaptureStatements.createSignal(signals));
      // Only the kinds some route needs leave the server: a database holding buffer tables alone
      // does not stream the deletes that drain them. A partition's changes come as its root.
      String actions =
          kinds.stream().map(ChangeKind::publishAction).collect(Collectors.joining(", "));
      String options = "publish = '" + actions + "', publish_via_partition_root = true";
      String name = TableName.quote(publication);
      // One transaction: a change committed between the statements would be decoded with the
      // tables of one and the actions of the other, or published without its snapshot asked for.
      List<TableName> holding = new ArrayList<>();
      List<TableName> later = new ArrayList<>();
      WithoutLockTimeout.run(
          c,
          () -> {
            lockForPublishing(c, publication, listed(tables, signals));
            List<TableName> locked = lockAgainstWrites(c, snapshot, LOCK_WAIT);
            // A table published already (for its deletes, or before a new slot) keeps its other
            // changes coming: it stays, its rows read now, as before the wait for its writers.
            List<TableName> unlocked = snapshot.stream().filter(t -> !locked.contains(t)).toList();
            List<TableName> absent =
                unpublished(c, CaptureStatements.PUBLISHED, publication, unlocked);
            later.addAll(absent);
            later.forEach(CaptureEngine::snapshotName); // refused now, as the snapshot would be
            String tableList =
                String.join(
                    ", ",
                    listed(tables.stream().filter(t -> !later.contains(t)).toList(), signals));
            if (exists(c, CaptureStatements.PUBLICATION_EXISTS, publication)) {
              s.execute("ALTER PUBLICATION " + name + " SET TABLE " + tableList);
              s.execute("ALTER PUBLICATION " + name + " SET (" + options + ")");
            } else {
              s.execute(
                  "CREATE PUBLICATION "
                      + name
                      + " FOR TABLE "
                      + tableList
                      + " WITH ("
                      + options
                      + ")");
            }
            // Marked as this installation's (one made before the mark came is taken as its).
            try (Statement mark = c.createStatement()) {
              mark.execute(
                  "COMMENT ON PUBLICATION " + name + " IS " + CaptureStatements.literal(owner));
            }
            s.execute(CaptureStatements.clearSignals(signals));
            try (PreparedStatement asked = c.prepareStatement(CaptureStatements.CLEAR_REREAD)) {
              asked.setString(1, publication); // asked for below, or joining later
              asked.execute();
            }
            try (PreparedStatement clear = c.prepareStatement(CaptureStatements.CLEAR_BUFFERED);
                PreparedStatement add = c.prepareStatement(CaptureStatements.ADD_BUFFERED)) {
              clear.setString(1, publication);
              clear.execute();
              for (TableName t : inserted) {
                add.setString(1, publication);
                add.setString(2, t.schema());
                add.setString(3, t.table());
                add.addBatch();
              }
              add.executeBatch();
            }
            holding.addAll(
                holdingRows(c, snapshot.stream().filter(t -> !later.contains(t)).toList()));
            if (!holding.isEmpty()) {
              requestSnapshot(c, signals, holding);
            }
          });
      return new Asked(holding, later);
    }
  }

  /**
   * The snapshots a start asked for.
   *
   * @param now tables whose snapshot was asked with the publication
   * @param later tables left out of the publication, which could not be locked against writes in
   *     time: each {@link #join}s it once it can be
   */
  record Asked(List<TableName> now, List<TableName> later) {}

  /**
   * Publishes a table {@link #prepare} left out, once it can be locked against writes within {@link
   * #JOIN_LOCK_WAIT}, and asks for its snapshot when it holds rows, in one transaction. A table
   * another process published meanwhile is left as it is.
   *
   * @return whether the table is published now; false when it could not be locked in time
   */
  static boolean join(DataSource ds, String publication, TableName table) throws SQLException {
    boolean[] joined = new boolean[1];
    try (Connection c = ds.getConnection();
        Statement s = c.createStatement()) {
      WithoutLockTimeout.run(
          c,
          () -> {
            if (lockAgainstWrites(c, List.of(table), JOIN_LOCK_WAIT).isEmpty()) {
              return;
            }
            joined[0] = true;
            if (!unpublished(c, CaptureStatements.PUBLISHED, publication, List.of(table))
                .isEmpty()) {
              s.execute(
                  "ALTER PUBLICATION "
                      + TableName.quote(publication)
                      + " ADD TABLE "
                      + table.quoted());
              if (!holdingRows(c, List.of(table)).isEmpty()) {
                requestSnapshot(c, CaptureStatements.signalTable(publication), List.of(table));
              }
            }
          });
    }
    return joined[0];
  }

  /** What the publication lists: {@code tables}, the heartbeat and signal tables, quoted. */
  private static List<String> listed(Collection<TableName> tables, String signals) {
    List<String> listed = new ArrayList<>();
    tables.forEach(t -> listed.add(t.quoted()));
    listed.add(TableName.parse(CaptureStatements.HEARTBEAT_TABLE).quoted());
    listed.add(TableName.parse(signals).quoted());
    return listed;
  }

  /**
   * Takes the lock changing the publication takes on each table it lists or leaves ({@code SHARE
   * UPDATE EXCLUSIVE}, which inserts do not wait for), without a limit, before any table is locked
   * against writes: waiting for it there (on a vacuum, an index built concurrently, a migration's
   * {@code ALTER TABLE}) would hold the application's inserts into the tables locked by then for as
   * long.
   */
  private static void lockForPublishing(Connection c, String publication, List<String> listed)
      throws SQLException {
    Set<String> all = new java.util.LinkedHashSet<>(listed);
    try (PreparedStatement ps = c.prepareStatement(CaptureStatements.PUBLISHED_RELATIONS)) {
      ps.setString(1, publication);
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) {
          all.add(rs.getString(1));
        }
      }
    }
    try (Statement s = c.createStatement()) {
      s.execute("LOCK TABLE " + String.join(", ", all) + " IN SHARE UPDATE EXCLUSIVE MODE");
    }
  }

  /**
   * Those of {@code tables} locked against writes until the transaction ends, all within {@code
   * within} together: a table locked first holds inserts back while the others are waited for, so
   * they share the wait rather than take one each. One that cannot be locked in time (a transaction
   * writing to it, a vacuum) is left out. The statements after it wait for their locks without a
   * limit again.
   */
  private static List<TableName> lockAgainstWrites(
      Connection c, List<TableName> tables, Duration within) throws SQLException {
    List<TableName> locked = new ArrayList<>();
    if (tables.isEmpty()) {
      return locked;
    }
    long until = System.nanoTime() + within.toNanos();
    try (Statement s = c.createStatement()) {
      for (TableName t : tables) {
        // Past the wait, each is only tried (0 would be no limit at all).
        long left = Math.max(1, TimeUnit.NANOSECONDS.toMillis(until - System.nanoTime()));
        s.execute("SET LOCAL lock_timeout = '" + left + "ms'");
        Savepoint before = c.setSavepoint();
        try {
          s.execute("LOCK TABLE " + t.quoted() + " IN SHARE MODE");
          c.releaseSavepoint(before);
          locked.add(t);
        } catch (SQLException e) {
          if (!LOCK_NOT_AVAILABLE.equals(e.getSQLState())) {
            throw e;
          }
          c.rollback(before);
        }
      }
      s.execute(Transactions.NO_LOCK_TIMEOUT);
    }
    return locked;
  }

  /**
   * The tables among {@code tables} that hold rows, asked in the transaction that publishes them. A
   * snapshot of an empty table would only publish a second time what is inserted while it runs.
   */
  private static List<TableName> holdingRows(Connection c, List<TableName> tables)
      throws SQLException {
    List<TableName> holding = new ArrayList<>();
    try (Statement s = c.createStatement()) {
      for (TableName t : tables) {
        try (ResultSet rs = s.executeQuery("SELECT EXISTS (SELECT 1 FROM " + t.quoted() + ")")) {
          rs.next();
          if (rs.getBoolean(1)) {
            holding.add(t);
          }
        }
      }
    }
    return holding;
  }

  /**
   * What capture's publication is marked with (a comment): the exact topic prefix and database
   * name. Slot and publication names are those lower-cased with punctuation made {@code _}, so two
   * installations whose prefixes differ only so ({@code team-a}, {@code team_a}) would share them,
   * each taking the other's slot over and rewriting its publication.
   */
  static String owner(String topicPrefix, String database) {
    return "Spillway capture: kafka.topic-prefix " + topicPrefix + ", database " + database;
  }

  /**
   * Refuses a publication of this name marked as another installation's: before this one stands by
   * for its slot, takes it over or changes the publication.
   *
   * @throws CaptureSetupException naming the other
   */
  static void checkOwner(DataSource ds, String database, String publication, String owner)
      throws SQLException {
    try (Connection c = ds.getConnection();
        PreparedStatement ps = c.prepareStatement(CaptureStatements.PUBLICATION_OWNER)) {
      ps.setString(1, publication);
      try (ResultSet rs = ps.executeQuery()) {
        String mark = rs.next() ? rs.getString(1) : null;
        if (mark != null && mark.startsWith("Spillway capture: ") && !mark.equals(owner)) {
          throw new CaptureSetupException(
              "Replication slot and publication "
                  + publication
                  + " of database "
                  + database
                  + " are another installation's ("
                  + mark.substring("Spillway capture: ".length())
                  + "), whose names differ from this one's only in case or punctuation; nothing"
                  + " was changed in the database: give this one another kafka.topic-prefix (or, if"
                  + " that is this"
                  + " installation renamed, let it take them: COMMENT ON PUBLICATION "
                  + TableName.quote(publication)
                  + " IS NULL).");
        }
      }
    }
  }

  /**
   * Refuses a slot name another database of the server (or a physical slot) holds: PostgreSQL would
   * refuse to make it with its own words, after capture had cleared its positions.
   *
   * @throws CaptureSetupException saying who holds it
   */
  static void checkSlotNameFree(DataSource ds, String database, String slot) throws SQLException {
    try (Connection c = ds.getConnection();
        PreparedStatement ps = c.prepareStatement(CaptureStatements.SLOT_ELSEWHERE)) {
      ps.setString(1, slot);
      try (ResultSet rs = ps.executeQuery()) {
        if (rs.next()) {
          String holder = rs.getString(1);
          throw new CaptureSetupException(
              "Replication slot "
                  + slot
                  + ", which capture of database "
                  + database
                  + " would make, is taken on this server by "
                  + (holder == null
                      ? "a " + rs.getString(2) + " slot"
                      : "database " + holder + " (another Spillway with the same topic prefix?)")
                  + "; nothing was changed: give this one another kafka.topic-prefix.");
        }
      }
    }
  }

  /** Writes a heartbeat, as Debezium's heartbeat does: a published change the slot keeps. */
  static void beat(DataSource ds) throws SQLException {
    try (Connection c = ds.getConnection();
        Statement s = c.createStatement()) {
      s.execute(CaptureStatements.HEARTBEAT_ACTION);
    }
  }

  /**
   * Creates the slot, before the publication changes: what is committed from then on is kept for
   * capture, and a snapshot asked for afterwards is read from it.
   */
  static void createSlot(DataSource ds, String slot) throws SQLException {
    try (Connection c = ds.getConnection();
        PreparedStatement ps = c.prepareStatement(CaptureStatements.CREATE_SLOT)) {
      // Making a slot waits for every transaction running then to end: past the pool's lock
      // timeout, one long write anywhere on the server would fail the start.
      WithoutLockTimeout.run(
          c,
          () -> {
            ps.setString(1, slot);
            ps.execute();
          });
    }
  }

  /**
   * A slot that can no longer stream.
   *
   * @param gone whether it no longer exists (else the server invalidated it)
   * @param sentence what an operator reads of it: what is lost, how to go on
   */
  record SlotLoss(boolean gone, String sentence) {}

  /**
   * Whether the slot can no longer stream: invalidated, or gone. Null while it can stream, and when
   * the connection reached a standby, which cannot tell.
   */
  static SlotLoss slotLoss(DataSource ds, String database, String slot) throws SQLException {
    return slotLoss(ds, database, slot, null);
  }

  /** As {@link #slotLoss(DataSource, String, String)}, also setting {@code wal} when not null. */
  static SlotLoss slotLoss(DataSource ds, String database, String slot, CaptureStats.SlotWal wal)
      throws SQLException {
    try (Connection c = ds.getConnection();
        PreparedStatement ps = c.prepareStatement(CaptureStatements.SLOT_CONDITION)) {
      ps.setString(1, slot);
      ps.setQueryTimeout(SLOT_QUERY_TIMEOUT_SECONDS);
      try (ResultSet rs = ps.executeQuery()) {
        rs.next();
        boolean standby = rs.getBoolean(1); // cannot tell of the primary's slots
        String reason = rs.getString(3);
        SlotLoss loss = null;
        if (!standby && !rs.getBoolean(2)) {
          loss = new SlotLoss(true, missingSlot(database, slot));
        } else if (!standby && reason != null) {
          loss = new SlotLoss(false, invalidatedSlot(database, slot, reason));
        }
        if (wal != null && loss != null) {
          wal.set(0L, 0L); // a lost slot holds nothing and has nothing left before its loss
        } else if (wal != null) {
          wal.set(nullableLong(rs, 4), nullableLong(rs, 5));
        }
        return loss;
      }
    }
  }

  private static Long nullableLong(ResultSet rs, int column) throws SQLException {
    long v = rs.getLong(column);
    return rs.wasNull() ? null : v;
  }

  static String missingSlot(String database, String slot) {
    return "Replication slot "
        + slot
        + " of database "
        + database
        + " no longer exists (dropped, or not on this server after a failover), so changes made"
        + " since it went are not captured. Start again to make a new one: "
        + AFTER_A_LOST_SLOT
        + ".";
  }

  /** What an operator reads when the slot was invalidated: what is lost and how to go on. */
  static String invalidatedSlot(String database, String slot, String reason) {
    String why =
        switch (reason) {
          case "wal_removed" -> ": it held more WAL than max_slot_wal_keep_size allows";
          case "idle_timeout" -> ": it was idle longer than idle_replication_slot_timeout";
          case "wal_level_insufficient" -> ": wal_level was set below logical";
          case "rows_removed" -> ": catalog rows it needed were vacuumed away";
          default -> "";
        };
    return "Replication slot "
        + slot
        + " of database "
        + database
        + " was invalidated by the server ("
        + reason
        + why
        + "), so the changes it had not streamed yet are lost; nothing was changed. Drop it"
        + " (SELECT pg_drop_replication_slot('"
        + slot
        + "')) and start again: "
        + AFTER_A_LOST_SLOT
        + ".";
  }

  /**
   * Whether a slot made anew still waits for its buffer tables' rows to be asked for ({@link
   * #beforeANewSlot}).
   */
  static boolean rereadMarked(DataSource ds, String slot) throws SQLException {
    try (Connection c = ds.getConnection()) {
      return tableOid(c, TableName.parse(CaptureStatements.REREADS_TABLE)) != null
          && exists(c, CaptureStatements.REREAD_MARKED, slot);
    }
  }

  /**
   * Whether the publication publishes any table of the application's (not only Spillway's own): a
   * publication a first start made before its slot, then ended, publishes Spillway's heartbeat
   * table alone.
   */
  static boolean publishesApplicationTables(DataSource ds, String publication) throws SQLException {
    try (Connection c = ds.getConnection()) {
      return exists(c, CaptureStatements.PUBLISHES_APPLICATION_TABLES, publication);
    }
  }

  /**
   * What must be there before a slot is made anew. A mark that the buffer tables' rows are to be
   * read, which {@link #prepare} clears as it asks for them: a new slot starts at the present, so
   * rows inserted since the old one's last position are in no WAL it reads, and a start ending
   * between the slot and that request (a signal, a crash) would leave the next one, finding the
   * slot there and the tables published, asking for nothing. And the publication, publishing
   * Spillway's heartbeat table alone until {@link #prepare} gives it its tables and actions: a
   * server before PostgreSQL 18 decodes each change with the catalogs as they were when it was
   * written, and ends the stream on a change written before the publication existed ({@code
   * publication "…" does not exist}), again at every try, so a change committed between a slot's
   * creation and its publication's would stop capture for good.
   */
  static void beforeANewSlot(DataSource ds, String publication) throws SQLException {
    try (Connection c = ds.getConnection();
        Statement s = c.createStatement()) {
      // Without the pool's lock timeout, as prepare itself: another installation's preparation
      // holds the shared heartbeat table for as long as its own waits take.
      WithoutLockTimeout.run(
          c,
          () -> {
            s.execute(CaptureStatements.CREATE_SCHEMA);
            s.execute(CaptureStatements.CREATE_HEARTBEAT);
            s.execute(CaptureStatements.CREATE_REREADS);
            try (PreparedStatement mark = c.prepareStatement(CaptureStatements.MARK_REREAD)) {
              mark.setString(1, publication);
              mark.execute();
            }
            if (!exists(c, CaptureStatements.PUBLICATION_EXISTS, publication)) {
              s.execute(
                  "CREATE PUBLICATION "
                      + TableName.quote(publication)
                      + " FOR TABLE "
                      + TableName.parse(CaptureStatements.HEARTBEAT_TABLE).quoted());
            }
          });
    }
  }

  /**
   * Drops the slot and the publication of a database capture will not read again, once the slot
   * streams to none (within 10 s), so that it holds no WAL; a next start there begins anew.
   */
  static void forget(DataSource ds, String slot) throws SQLException, InterruptedException {
    if (!slotReleased(ds, slot, Duration.ofSeconds(10))) {
      throw new SQLException("replication slot " + slot + " still streams");
    }
    try (Connection c = ds.getConnection();
        PreparedStatement drop =
            c.prepareStatement(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
                    + " WHERE slot_name = ? AND database = current_database()");
        Statement st = c.createStatement()) {
      drop.setString(1, slot);
      drop.execute();
      st.execute("DROP PUBLICATION IF EXISTS " + TableName.quote(slot));
    }
  }

  /** Drops a slot this start created, when preparing the database failed after it. */
  static void dropSlot(DataSource ds, String slot) throws SQLException {
    try (Connection c = ds.getConnection();
        PreparedStatement ps = c.prepareStatement(CaptureStatements.DROP_SLOT)) {
      ps.setString(1, slot);
      ps.execute();
    }
  }

  /**
   * The tables among {@code inserted} whose rows no buffer has read yet, asked before {@link
   * #prepare} changes the publication: those whose inserts it does not publish yet (rows inserted
   * before they join it are never decoded), and those the last start handed to no buffer though the
   * publication carried them (a loose-foreign-key parent gaining a buffer: its inserts were decoded
   * and passed over). A slot whose last start recorded none (one of a version before the record, or
   * with no buffer) has every table read: which of them a buffer read all along cannot be told, and
   * rows handed over twice are better than rows never read.
   */
  static List<TableName> notYetRead(
      DataSource ds, String publication, Collection<TableName> inserted) throws SQLException {
    try (Connection c = ds.getConnection()) {
      List<TableName> unread =
          new ArrayList<>(
              unpublished(c, CaptureStatements.INSERTS_PUBLISHED, publication, inserted));
      Set<TableName> buffered = new HashSet<>();
      if (tableOid(c, TableName.parse(CaptureStatements.BUFFERED_TABLE)) != null) {
        try (PreparedStatement ps = c.prepareStatement(CaptureStatements.BUFFERED)) {
          ps.setString(1, publication);
          try (ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
              buffered.add(new TableName(rs.getString(1), rs.getString(2)));
            }
          }
        }
      }
      inserted.stream()
          .filter(t -> !unread.contains(t) && !buffered.contains(t))
          .forEach(unread::add);
      return unread;
    }
  }

  /** Whether the table exists. */
  static boolean exists(DataSource ds, TableName table) throws SQLException {
    try (Connection c = ds.getConnection()) {
      return tableOid(c, table) != null;
    }
  }

  /** Those of {@code tables} the publication does not publish at all. */
  static List<TableName> unpublished(
      DataSource ds, String publication, Collection<TableName> tables) throws SQLException {
    return unpublished(ds, CaptureStatements.PUBLISHED, publication, tables);
  }

  private static List<TableName> unpublished(
      DataSource ds, String query, String publication, Collection<TableName> inserted)
      throws SQLException {
    try (Connection c = ds.getConnection()) {
      return unpublished(c, query, publication, inserted);
    }
  }

  private static List<TableName> unpublished(
      Connection c, String query, String publication, Collection<TableName> inserted)
      throws SQLException {
    Set<TableName> published = new HashSet<>();
    try (PreparedStatement ps = c.prepareStatement(query)) {
      ps.setString(1, publication);
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) {
          published.add(new TableName(rs.getString(1), rs.getString(2)));
        }
      }
    }
    return inserted.stream().filter(t -> !published.contains(t)).toList();
  }

  /**
   * Asks Debezium for an incremental snapshot of {@code tables}: their rows are read in chunks by
   * primary key and published as inserts, interleaved with the stream so a row changed meanwhile is
   * published once. Debezium reads the signal from the stream, so the engine need not run yet, but
   * the slot must exist. On its own connection, committed at once; a standby is refused.
   */
  static void requestSnapshot(DataSource ds, String database, String slot, List<TableName> tables)
      throws SQLException {
    try (Connection c = ds.getConnection()) {
      requirePrimary(c, database);
      c.setAutoCommit(true);
      requestSnapshot(c, CaptureStatements.signalTable(slot), tables);
    }
  }

  /** As {@link #requestSnapshot(DataSource, String, String, List)}, in the caller's transaction. */
  private static void requestSnapshot(Connection c, String signals, List<TableName> tables)
      throws SQLException {
    Map<String, Object> data = new LinkedHashMap<>();
    data.put("type", "incremental");
    data.put("data-collections", tables.stream().map(CaptureEngine::snapshotName).toList());
    String json;
    try {
      json = JSON.writeValueAsString(data);
    } catch (JsonProcessingException e) {
      throw new IllegalStateException(e);
    }
    try (PreparedStatement ps = c.prepareStatement(CaptureStatements.sendSnapshotSignal(signals))) {
      ps.setString(1, UUID.randomUUID().toString());
      ps.setString(2, json);
      ps.executeUpdate();
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

  /**
   * What {@link #lockStart} got.
   *
   * @param held the connection holding the lock, or null when it was not taken
   * @param slotStreams when not taken: whether it gave up because the slot streams to another
   *     process, rather than waiting its time
   */
  record StartLock(Connection held, boolean slotStreams) {}

  /**
   * Takes the slot's start lock, which one process at a time holds from before it looks whether the
   * slot streams until its engine has streamed for a while: instances starting together (deployed
   * at once, or taking over at once) would otherwise all find the slot free, all make or start it,
   * and all count its stream as their own. Waits up to {@code within} for a start under way
   * elsewhere, and no longer than until the slot streams: standing by needs no lock.
   *
   * @param direct connections of their own, not the pool's: the lock is held while the start uses
   *     the pool, which may have one connection
   * @param ds the pool, to see whether the slot streams
   * @return the connection holding the lock, which closing lets go, or why there is none
   */
  static StartLock lockStart(DataSource direct, DataSource ds, String slot, Duration within)
      throws SQLException, InterruptedException {
    long deadline = System.nanoTime() + within.toNanos();
    Connection c = direct.getConnection();
    try (Statement keepalives = c.createStatement()) {
      keepalives.execute(CaptureStatements.START_LOCK_KEEPALIVES);
    } catch (SQLException e) {
      // Best effort: a server (or something between) that refuses them leaves the system's own.
      log.debug("The start lock's session keeps the system's keepalives: {}", e.getMessage());
    }
    try (PreparedStatement ps = c.prepareStatement(CaptureStatements.TRY_START_LOCK)) {
      ps.setString(1, slot);
      while (true) {
        try (ResultSet rs = ps.executeQuery()) {
          rs.next();
          if (rs.getBoolean(1)) {
            return new StartLock(c, false);
          }
        }
        boolean streams = slotActive(ds, slot);
        if (streams || System.nanoTime() > deadline) {
          c.close();
          return new StartLock(null, streams);
        }
        Thread.sleep(50);
      }
    } catch (SQLException | InterruptedException | RuntimeException e) {
      c.close();
      throw e;
    }
  }

  /**
   * Marks the slot let go for good by this process, once the server shows no process streaming from
   * it (waiting up to {@code within} for the one that just ended): a standing-by instance then
   * takes it over at once. Nothing is marked while a process streams from it.
   *
   * @return whether it was marked
   */
  static boolean markReleased(DataSource ds, String slot, Duration within)
      throws SQLException, InterruptedException {
    if (!slotReleased(ds, slot, within)) {
      return false;
    }
    try (Connection c = ds.getConnection();
        PreparedStatement ps = c.prepareStatement(CaptureStatements.MARK_RELEASED)) {
      ps.setString(1, slot);
      ps.setString(2, slot);
      return ps.executeUpdate() > 0;
    }
  }

  private static final String UNDEFINED_TABLE = "42P01";

  /**
   * Takes back the mark of {@link #markReleased}: by the instance taking the slot over, which thus
   * claims it (of several standing by, one finds the mark), and by each process once it streams, so
   * an older mark does not hand its slot over while it reconnects. False where there was none, or
   * no process of this version has streamed from the database yet.
   */
  static boolean clearReleased(DataSource ds, String slot) throws SQLException {
    try (Connection c = ds.getConnection();
        PreparedStatement ps = c.prepareStatement(CaptureStatements.CLEAR_RELEASED)) {
      ps.setString(1, slot);
      return ps.executeUpdate() > 0;
    } catch (SQLException e) {
      if (UNDEFINED_TABLE.equals(e.getSQLState())) {
        return false;
      }
      throw e;
    }
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

  /** The first of the table's partition ancestors that {@code captured} holds, or null. */
  private static TableName capturedAncestor(Connection c, long oid, Map<Long, TableName> captured)
      throws SQLException {
    try (PreparedStatement ps = c.prepareStatement(CaptureStatements.PARTITION_ANCESTORS)) {
      ps.setLong(1, oid);
      ps.setLong(2, oid);
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) {
          TableName t = captured.get(rs.getLong(1));
          if (t != null) {
            return t;
          }
        }
      }
    }
    return null;
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

  /**
   * Refuses a database answering from a standby, in one sentence ({@link CaptureSetupException}).
   */
  static void requirePrimary(DataSource ds, String database) throws SQLException {
    try (Connection c = ds.getConnection()) {
      requirePrimary(c, database);
    }
  }

  private static void requirePrimary(Connection c, String database) throws SQLException {
    if ("t".equals(single(c, CaptureStatements.IN_RECOVERY))) {
      throw new CaptureSetupException(
          "Database "
              + database
              + " answered from a standby (in recovery); capture needs the primary: point its"
              + " url at it (with several hosts, add targetServerType=primary).");
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
