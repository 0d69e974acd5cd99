package dev.spillway.capture;

/** Every SQL statement capture runs against a source database. */
final class CaptureStatements {
  private CaptureStatements() {}

  static final String WAL_LEVEL = "SELECT current_setting('wal_level')";

  static final String CAN_REPLICATE =
      "SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user";

  /** 1: quoted table name. Null when the table does not exist. */
  static final String TABLE_OID = "SELECT to_regclass(?)::oid";

  /** 1: table oid. A row when the table has a primary key. */
  static final String HAS_PRIMARY_KEY =
      "SELECT 1 FROM pg_index WHERE indrelid = ? AND indisprimary";

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

  /** 1: publication name. */
  static final String PUBLICATION_EXISTS = "SELECT 1 FROM pg_publication WHERE pubname = ?";

  /** 1: slot name. */
  static final String SLOT_EXISTS = "SELECT 1 FROM pg_replication_slots WHERE slot_name = ?";

  /** 1: slot name. A row with true while a client streams from it. */
  static final String SLOT_ACTIVE =
      "SELECT active FROM pg_replication_slots WHERE slot_name = ? AND database = current_database()";

  /** 1: slot name. */
  static final String CREATE_SLOT = "SELECT pg_create_logical_replication_slot(?, 'pgoutput')";

  /** Bytes of WAL each slot of this database keeps from being recycled. */
  static final String WAL_HELD =
      "SELECT slot_name, active,"
          + " COALESCE(pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn), 0)::bigint AS held"
          + " FROM pg_replication_slots WHERE database = current_database() ORDER BY slot_name";
}
