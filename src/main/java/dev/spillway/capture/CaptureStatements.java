package dev.spillway.capture;

import dev.spillway.event.TableName;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.List;

/** Every SQL statement capture runs against a source database. */
final class CaptureStatements {
  private CaptureStatements() {}

  static final String WAL_LEVEL = "SELECT current_setting('wal_level')";

  /** True on a standby. */
  static final String IN_RECOVERY = "SELECT pg_is_in_recovery()";

  static final String CAN_REPLICATE =
      "SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user";

  /** 1: quoted table name. Null when the table does not exist. */
  static final String TABLE_OID = "SELECT to_regclass(?)::oid";

  /** 1, 2: table oid. The tables it is a partition of, at any depth. */
  static final String PARTITION_ANCESTORS =
      "SELECT relid::oid FROM pg_partition_ancestors(?::oid) WHERE relid <> ?::oid";

  /** 1: table oid. A row when the table has a primary key. */
  static final String HAS_PRIMARY_KEY =
      "SELECT 1 FROM pg_index WHERE indrelid = ? AND indisprimary";

  /**
   * 1, 2, 3: table oid. A row when the table, or one of its leaf partitions, has no replica
   * identity ({@code REPLICA IDENTITY NOTHING}, or {@code USING INDEX} an index since dropped): its
   * name as SQL writes it, and whether it is a partition.
   */
  static final String WITHOUT_IDENTITY =
      // pg_partition_tree gives nothing for a table neither partitioned nor a partition.
      "SELECT c.oid::regclass::text, c.oid <> ?::oid FROM pg_class c"
          + " WHERE c.relkind = 'r' AND (c.relreplident = 'n' OR c.relreplident = 'i'"
          // An identity index dropped leaves the table without one, as NOTHING does.
          + " AND NOT EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid"
          + " AND i.indisreplident))"
          + " AND (c.oid = ?::oid OR c.oid IN (SELECT relid FROM pg_partition_tree(?::oid)))"
          + " LIMIT 1";

  /**
   * 1, 2, 3: table oid. A row when the table, or one of its leaf partitions, has its replica
   * identity {@code USING INDEX} an index that leaves out a column of its primary key, so a delete
   * carries no key (Debezium makes one up: 0 for a bigint): its name as SQL writes it, whether it
   * is a partition, and the index.
   */
  static final String IDENTITY_WITHOUT_KEY =
      "SELECT c.oid::regclass::text, c.oid <> ?::oid, ri.indexrelid::regclass::text FROM pg_class c"
          + " JOIN pg_index ri ON ri.indrelid = c.oid AND ri.indisreplident"
          + " JOIN pg_index pk ON pk.indrelid = c.oid AND pk.indisprimary"
          + " WHERE c.relkind = 'r' AND c.relreplident = 'i'"
          // Key columns alone: an index's INCLUDE columns are no part of the identity.
          + " AND NOT ((pk.indkey::int2[])[0:pk.indnkeyatts - 1]"
          + " <@ (ri.indkey::int2[])[0:ri.indnkeyatts - 1])"
          + " AND (c.oid = ?::oid OR c.oid IN (SELECT relid FROM pg_partition_tree(?::oid)))"
          + " LIMIT 1";

  static final String CREATE_SCHEMA = "CREATE SCHEMA IF NOT EXISTS spillway";

  /**
   * Written by Debezium's heartbeat so that a slot whose tables are idle still advances: the table
   * is published, so each beat is a change that moves the confirmed position.
   */
  static final String CREATE_HEARTBEAT =
      "CREATE TABLE IF NOT EXISTS spillway.capture_heartbeat"
          + " (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
          + " beat_at timestamptz NOT NULL DEFAULT now())";

  /** Keeps one row: deletes the previous beat and inserts the next, both published. */
  static final String HEARTBEAT_ACTION =
      "WITH old AS (DELETE FROM spillway.capture_heartbeat)"
          + " INSERT INTO spillway.capture_heartbeat (beat_at) VALUES (now())";

  static final String HEARTBEAT_TABLE = "spillway.capture_heartbeat";

  /**
   * The slots whose last process stopped and let them go for good: a standing-by instance takes
   * such a slot over at once, not after the wait that leaves a reconnecting process its slot. Not
   * published; a row is written by the stopping process and deleted by the instance taking over.
   */
  static final String CREATE_RELEASES =
      "CREATE TABLE IF NOT EXISTS spillway.capture_release"
          + " (slot text PRIMARY KEY, released_at timestamptz NOT NULL)";

  /**
   * A row per slot made anew whose buffer tables' rows have not been asked for yet: set before the
   * slot is made, cleared in the transaction that asks for them, so a start that ends in between
   * leaves it for the next one.
   */
  static final String CREATE_REREADS =
      "CREATE TABLE IF NOT EXISTS spillway.capture_reread (slot text PRIMARY KEY)";

  /** 1: slot name. */
  static final String MARK_REREAD =
      "INSERT INTO spillway.capture_reread VALUES (?) ON CONFLICT DO NOTHING";

  /** The marks' table (an installation before it has none). */
  static final String REREADS_TABLE = "spillway.capture_reread";

  /** 1: slot name. */
  static final String REREAD_MARKED = "SELECT 1 FROM spillway.capture_reread WHERE slot = ?";

  /** 1: slot name. */
  static final String CLEAR_REREAD = "DELETE FROM spillway.capture_reread WHERE slot = ?";

  /**
   * Per slot, the tables whose inserts capture handed to a buffer as of its last start: a table the
   * publication carried for another pipeline (a loose-foreign-key parent) that gains a buffer is
   * then told apart from one a buffer has read all along.
   */
  static final String CREATE_BUFFERED =
      "CREATE TABLE IF NOT EXISTS spillway.capture_buffered (slot text, schema_name text,"
          + " table_name text, PRIMARY KEY (slot, schema_name, table_name))";

  /** The buffered tables' table (an installation before it has none). */
  static final String BUFFERED_TABLE = "spillway.capture_buffered";

  /** 1: slot name. */
  static final String BUFFERED =
      "SELECT schema_name, table_name FROM spillway.capture_buffered WHERE slot = ?";

  /** 1: slot name. */
  static final String CLEAR_BUFFERED = "DELETE FROM spillway.capture_buffered WHERE slot = ?";

  /** 1: slot name, 2: schema, 3: table. */
  static final String ADD_BUFFERED = "INSERT INTO spillway.capture_buffered VALUES (?, ?, ?)";

  /** 1 and 2: slot name. Marks the slot let go, unless a process streams from it already. */
  static final String MARK_RELEASED =
      "INSERT INTO spillway.capture_release (slot, released_at) SELECT ?, now()"
          + " WHERE NOT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = ? AND active)"
          + " ON CONFLICT (slot) DO UPDATE SET released_at = excluded.released_at";

  /** 1: slot name. */
  static final String CLEAR_RELEASED = "DELETE FROM spillway.capture_release WHERE slot = ?";

  /**
   * Debezium's signal table of a slot: a row of type {@code execute-snapshot} here starts an
   * incremental snapshot (read from the stream, so it must be published), and Debezium writes the
   * watermarks that bound each chunk of it here too. One per slot: a connector runs every signal
   * its publication carries, so installations sharing a database must not share one.
   */
  static String signalTable(String slot) {
    String name = slot + "_signal";
    // A slot name of 57 to 63 characters, which PostgreSQL takes, leaves no room for the suffix:
    // 64 bits of a digest, where names as alike as ..._c0 and ..._an meet in a String hash.
    return "spillway."
        + (name.length() <= CaptureSettings.MAX_NAME_LENGTH
            ? name
            : "signal_" + digest(slot).substring(0, 16));
  }

  private static String digest(String text) {
    try {
      return HexFormat.of()
          .formatHex(
              MessageDigest.getInstance("SHA-256").digest(text.getBytes(StandardCharsets.UTF_8)));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e); // every Java runtime has SHA-256
    }
  }

  /**
   * The signal tables earlier versions gave the slot: the one all slots shared, and for a long slot
   * name the one a String hash of it named.
   */
  static List<String> earlierSignalTables(String slot) {
    String hashed = "spillway.signal_" + Integer.toHexString(slot.hashCode());
    return signalTable(slot).startsWith("spillway.signal_")
        ? List.of(SHARED_SIGNAL_TABLE, hashed)
        : List.of(SHARED_SIGNAL_TABLE);
  }

  /**
   * The signal table every slot's publication carried before each had its own: a start that finds
   * it in the publication cannot tell which snapshots asked there were not yet read.
   */
  static final String SHARED_SIGNAL_TABLE = "spillway.capture_signal";

  static String createSignal(String table) {
    return "CREATE TABLE IF NOT EXISTS "
        + TableName.parse(table).quoted()
        + " (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL, data text)";
  }

  /**
   * Clears what signals and watermarks the table holds: each was read from the stream, which keeps
   * any not read yet, so only the table stays small.
   */
  static String clearSignals(String table) {
    return "DELETE FROM " + TableName.parse(table).quoted();
  }

  /** 1: signal id, 2: the snapshot's JSON data. */
  static String sendSnapshotSignal(String table) {
    return "INSERT INTO "
        + TableName.parse(table).quoted()
        + " (id, type, data) VALUES (?, 'execute-snapshot', ?)";
  }

  /** 1: publication name. The tables whose inserts it publishes. */
  static final String INSERTS_PUBLISHED =
      "SELECT t.schemaname, t.tablename FROM pg_publication p"
          + " JOIN pg_publication_tables t ON t.pubname = p.pubname"
          + " WHERE p.pubname = ? AND p.pubinsert";

  /** 1: publication name. The tables it publishes, whatever the kinds of change. */
  static final String PUBLISHED =
      "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = ?";

  /** 1: publication name. */
  static final String PUBLICATION_EXISTS = "SELECT 1 FROM pg_publication WHERE pubname = ?";

  /** A string as an SQL literal (with standard_conforming_strings, PostgreSQL's default). */
  static String literal(String value) {
    return "'" + value.replace("'", "''") + "'";
  }

  /**
   * 1: publication. Its comment, which names the installation and database it is capture's of
   * ({@link SourcePreparation#owner}); no row without the publication.
   */
  static final String PUBLICATION_OWNER =
      "SELECT obj_description(oid, 'pg_publication') FROM pg_publication WHERE pubname = ?";

  /** 1: publication. The tables it lists, each as {@code schema.table} quoted where needed. */
  static final String PUBLISHED_RELATIONS =
      "SELECT format('%I.%I', n.nspname, c.relname) FROM pg_publication p"
          + " JOIN pg_publication_rel r ON r.prpubid = p.oid JOIN pg_class c ON c.oid = r.prrelid"
          + " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE p.pubname = ?";

  /** 1: publication. A table it publishes that is not in Spillway's own schema. */
  static final String PUBLISHES_APPLICATION_TABLES =
      "SELECT 1 FROM pg_publication_tables WHERE pubname = ? AND schemaname <> 'spillway'";

  /**
   * 1: slot name. Takes, when free, the lock one process at a time holds while it starts capture
   * from the slot (a session's advisory lock, let go when its connection closes): true when taken.
   */
  static final String TRY_START_LOCK =
      "SELECT pg_try_advisory_lock(hashtext('spillway capture start'), hashtext(?))";

  /**
   * The start lock's session asks its client every few seconds once it has been silent for 10 s: a
   * host that died holding it lets it go within about 25 s, not the system's two hours.
   */
  static final String START_LOCK_KEEPALIVES =
      "SET tcp_keepalives_idle = 10; SET tcp_keepalives_interval = 5;"
          + " SET tcp_keepalives_count = 3";

  /** 1: slot name. A row, the WAL the slot keeps, when it exists in this database, idle. */
  static final String IDLE_SLOT_WAL =
      "SELECT COALESCE(pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn), 0)::bigint"
          + " FROM pg_replication_slots WHERE slot_name = ? AND database = current_database()"
          + " AND NOT active";

  /** 1: slot name. A row with true while a client streams from it. */
  static final String SLOT_ACTIVE =
      "SELECT active FROM pg_replication_slots WHERE slot_name = ? AND database = current_database()";

  /**
   * Why the server invalidated slot {@code s} of {@code pg_replication_slots}, or null while it can
   * stream: PostgreSQL 17 and later name the reason, earlier ones only mark a slot whose WAL was
   * removed as lost.
   */
  private static final String INVALIDATION =
      "COALESCE(to_jsonb(s) ->> 'invalidation_reason',"
          + " CASE WHEN s.wal_status = 'lost' THEN 'wal_removed' END)";

  /**
   * 1: slot name. Whether the server is a standby (which cannot tell of the primary's slots),
   * whether the slot exists, why it was invalidated ({@link #INVALIDATION}), the bytes of WAL it
   * keeps (null on a standby, which has no current position) and the bytes more it may keep before
   * the server invalidates it (null without {@code max_slot_wal_keep_size}).
   */
  static final String SLOT_CONDITION =
      "SELECT pg_is_in_recovery(), s.slot_name IS NOT NULL, "
          + INVALIDATION
          + ", CASE WHEN NOT pg_is_in_recovery()"
          + " THEN pg_wal_lsn_diff(pg_current_wal_lsn(), s.restart_lsn)::bigint END,"
          + " s.safe_wal_size"
          + " FROM (SELECT 1) AS one LEFT JOIN pg_replication_slots s"
          + " ON s.slot_name = ? AND s.database = current_database()";

  /**
   * 1: slot name. The database holding a slot of that name other than the captured one's (null for
   * a physical slot): slot names are the server's, not a database's.
   */
  static final String SLOT_ELSEWHERE =
      "SELECT database, slot_type FROM pg_replication_slots"
          + " WHERE slot_name = ? AND database IS DISTINCT FROM current_database()";

  /** 1: slot name. */
  static final String CREATE_SLOT = "SELECT pg_create_logical_replication_slot(?, 'pgoutput')";

  static final String DROP_SLOT = "SELECT pg_drop_replication_slot(?)";

  /**
   * Bytes of WAL each slot of this database keeps from being recycled, the bytes more it may keep
   * before the server invalidates it (null without {@code max_slot_wal_keep_size}), and why it was
   * invalidated.
   */
  static final String WAL_HELD =
      "SELECT s.slot_name, s.active,"
          + " COALESCE(pg_wal_lsn_diff(pg_current_wal_lsn(), s.restart_lsn), 0)::bigint AS held,"
          + " s.safe_wal_size, "
          + INVALIDATION
          + " FROM pg_replication_slots s WHERE s.database = current_database() ORDER BY s.slot_name";
}
