package dev.spillway.health;

import dev.spillway.jdbc.Databases;

/** Every query the health monitor runs; all read PostgreSQL's own statistics views. */
final class HealthStatements {
  private HealthStatements() {}

  /**
   * Whether the role sees every session's statistics (superuser, or pg_read_all_stats, which
   * pg_monitor grants): without it the views hide other roles' queries, transaction starts, vacuum
   * progress and standby lag, and the indicators reading them would see nothing amiss.
   */
  static final String SEES_ALL = "pg_has_role('pg_read_all_stats', 'USAGE')";

  /**
   * This database's oid. The statistics views list every database of the server, where another
   * database's table can have the same oid (a copy made with {@code CREATE DATABASE … TEMPLATE}).
   */
  private static final String THIS_DATABASE =
      "(SELECT oid FROM pg_database WHERE datname = current_database())";

  /**
   * 1: text array of quoted tables. Each table, as {@code t (root, relid)} with {@code root} its
   * quoted name as given, and every table that inherits from it, its partitions at any depth among
   * them: read from the catalog, which takes no lock on them, unlike {@code pg_partition_tree},
   * whose locks would queue the monitor behind a schema change waiting for the table. A missing
   * table gives one null {@code relid}.
   */
  private static final String TABLES_AND_PARTITIONS =
      "WITH RECURSIVE t (root, relid) AS (SELECT n, to_regclass(n)::oid FROM unnest(?::text[]) n"
          + " UNION SELECT t.root, i.inhrelid FROM pg_inherits i JOIN t ON i.inhparent = t.relid)";

  /**
   * 1: text array of quoted tables. Per table (its quoted name as given), autovacuum workers on it,
   * on any of its partitions (autovacuum works on leaves only) or on their TOAST tables (vacuumed
   * as tables of their own); the third column is true when one runs to prevent transaction ID
   * wraparound; the fourth, {@link #SEES_ALL}. One statement for every table watched.
   */
  static final String AUTOVACUUM =
      TABLES_AND_PARTITIONS
          + ", r (root, relid) AS (SELECT root, relid FROM t"
          + " UNION ALL SELECT t.root, c.reltoastrelid FROM t JOIN pg_class c ON c.oid = t.relid)"
          + " SELECT r.root, count(a.pid), bool_or(a.query LIKE '%to prevent wraparound%'), "
          + SEES_ALL
          + " FROM r LEFT JOIN (pg_stat_progress_vacuum v JOIN pg_stat_activity a ON a.pid = v.pid"
          + " AND a.backend_type = 'autovacuum worker' AND v.datid = "
          + THIS_DATABASE
          + ") ON v.relid = r.relid GROUP BY r.root";

  /**
   * Whether the database takes no writes: a standby (recovering), or {@code
   * default_transaction_read_only} on (for maintenance, or a server set up read-only), as a new
   * session, such as the pool's next connection, would have it. A setting made for the database or
   * the role ({@code ALTER DATABASE … SET}) reaches new sessions only, not the monitor's own kept
   * one: it is read from where it is kept, the most specific first (database and role, role,
   * database, every database). Without one, the session's own value, which a reloaded server
   * setting reaches; unless it came from such a setting since taken back (for every database and
   * role too, {@code ALTER ROLE ALL SET}): then the default, off.
   */
  static final String READ_ONLY =
      "SELECT pg_is_in_recovery(), COALESCE((SELECT split_part(c, '=', 2)::bool"
          + " FROM pg_db_role_setting s, unnest(s.setconfig) c"
          + " WHERE c LIKE 'default\\_transaction\\_read\\_only=%'"
          + " AND s.setdatabase IN (0, "
          + THIS_DATABASE
          + ") AND s.setrole IN (0, (SELECT oid FROM pg_roles WHERE rolname = current_user))"
          + " ORDER BY s.setdatabase <> 0 AND s.setrole <> 0 DESC, s.setrole <> 0 DESC,"
          + " s.setdatabase <> 0 DESC LIMIT 1),"
          + " (SELECT CASE WHEN source IN ('global', 'database', 'user', 'database user')"
          + " THEN boot_val::bool ELSE setting::bool END"
          + " FROM pg_settings WHERE name = 'default_transaction_read_only'))";

  /** WAL segments written but not yet archived. Needs pg_monitor or superuser. */
  static final String WAL_ARCHIVE_READY =
      "SELECT count(*) FROM pg_ls_archive_statusdir() WHERE name LIKE '%.ready'";

  /** Current WAL position in bytes since the start of WAL. */
  static final String WAL_POSITION = "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint";

  /**
   * 1: text array of application names left out. Worst replay lag of any other standby, in seconds
   * and bytes, then {@link #SEES_ALL}.
   */
  // Standbys only: a walsender streaming a logical slot (Spillway's own capture, or any other
  // logical consumer) is not a replica; the slot-WAL indicator watches those.
  static final String REPLICATION_LAG =
      "SELECT COALESCE(max(EXTRACT(EPOCH FROM r.replay_lag)), 0),"
          + " COALESCE(max(pg_wal_lsn_diff(pg_current_wal_lsn(), r.replay_lsn)), 0)::bigint, "
          + SEES_ALL
          + " FROM pg_stat_replication r WHERE r.application_name <> ALL (?::text[])"
          + " AND NOT EXISTS (SELECT 1 FROM pg_replication_slots s"
          + " WHERE s.active_pid = r.pid AND s.slot_type = 'logical')";

  /** 1: slot name. WAL kept by that slot. */
  static final String SLOT_WAL =
      "SELECT COALESCE(pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn), 0)::bigint"
          + " FROM pg_replication_slots WHERE slot_name = ?";

  /**
   * Client connections, max_connections, then the connections of it reserved for superusers and,
   * from PostgreSQL 16, for roles given {@code pg_use_reserved_connections}. The server's own
   * processes (checkpointer, WAL writer, autovacuum, WAL senders…) show in pg_stat_activity too but
   * take none of its slots.
   */
  static final String CONNECTIONS =
      "SELECT count(*), current_setting('max_connections')::int,"
          + " current_setting('superuser_reserved_connections')::int"
          + " + coalesce(current_setting('reserved_connections', true)::int, 0)"
          + " FROM pg_stat_activity WHERE backend_type = 'client backend'";

  /**
   * 1: text array of quoted tables; 2: seconds. Per table (its quoted name as given), other
   * sessions waiting for a lock on the table or one of its partitions, or for one of their rows,
   * and transactions older than the threshold holding a lock on one, then {@link #SEES_ALL}. A
   * session waiting for a row another transaction locked waits on that transaction's id, which
   * names no table; while it waits it holds a {@code tuple} lock on the table the row is in (a
   * partition, for a row of a partitioned table), taken for that wait only. Spillway's own sessions
   * are left out, and so are autovacuum workers: their lock is one DELETE and UPDATE do not wait
   * for, and {@link #AUTOVACUUM} reads them. One statement for every table watched.
   */
  static final String LOCKS =
      TABLES_AND_PARTITIONS
          + " SELECT t.root,"
          + " count(DISTINCT a.pid) FILTER (WHERE NOT l.granted OR l.locktype = 'tuple'),"
          + " count(DISTINCT a.pid) FILTER (WHERE l.granted"
          + " AND a.xact_start < now() - make_interval(secs => ?)), "
          + SEES_ALL
          + " FROM t LEFT JOIN (pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
          + " AND l.database = "
          + THIS_DATABASE
          + " AND a.pid <> pg_backend_pid()"
          + " AND a.application_name <> '"
          + Databases.APPLICATION_NAME
          + "' AND a.backend_type <> 'autovacuum worker')"
          + " ON l.relation = t.relid GROUP BY t.root";
}
