package dev.spillway.capture;

import dev.spillway.event.KafkaClients;
import dev.spillway.event.Pipeline;
import dev.spillway.event.TableName;
import dev.spillway.event.TopicProvisioner;
import dev.spillway.jdbc.Databases;
import dev.spillway.support.AllAtOnce;
import java.io.IOException;
import java.sql.SQLException;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Change capture for every source database of a {@link CapturePlan}: one Debezium engine each, one
 * shared idempotent producer. Every database is checked before anything is changed in any of them.
 */
public final class Capture implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(Capture.class);
  public static final Duration DEFAULT_START_TIMEOUT = Duration.ofSeconds(60);

  /** How often each replication slot is asked whether the server has invalidated it. */
  static final Duration SLOT_CHECK_INTERVAL = Duration.ofSeconds(5);

  /**
   * How often an instance standing by asks whether the slot still streams: a slot its instance let
   * go is taken over at the next look.
   */
  static final Duration TAKE_OVER_CHECK_INTERVAL = Duration.ofSeconds(1);

  /**
   * Drops the replication slot and publication capture made in a database it will not read again (a
   * demo's), once its capture stopped: an inactive slot holds the whole server's WAL.
   */
  public static void forget(DataSource database, String slot)
      throws SQLException, InterruptedException {
    SourcePreparation.forget(database, slot);
  }

  /** Captures started in this process so far. */
  private static final AtomicInteger STARTED = new AtomicInteger();

  /**
   * This capture's number among them, in its engines' JMX names: Debezium's are per database
   * otherwise, and one engine waits two minutes for another's of the same name to go.
   */
  private final int number = STARTED.incrementAndGet();

  /** The engines streaming in this process; one takes a standing-by database's place. */
  private final List<CaptureEngine> engines = new CopyOnWriteArrayList<>();

  /** The databases whose slot streams to another process, and since when this one stands by. */
  private final Map<String, Instant> standingBy = new ConcurrentHashMap<>();

  // The take-over thread's own: since when each standing-by database's slot has streamed to no
  // process, and how many take-overs of it failed in a row.
  private final Map<String, Instant> idleSince = new HashMap<>();

  /** Each database's take-overs failed in a row, and when the last of them did. */
  private final Map<String, FailedTakeOvers> failedTakeOvers = new HashMap<>();

  private record FailedTakeOvers(int inARow, Instant last) {}

  /** Why a take-over stopped capture; written once, by the take-over thread. */
  private volatile String takeOverFailure;

  /** The database's refusal that stopped a take-over, when that was why; written with it. */
  private volatile CaptureSetupException takeOverRefusal;

  private volatile boolean closing;

  /** This instance's own few seconds on top of {@link #TAKE_OVER_AFTER}. */
  private final Duration stagger = Duration.ofMillis(ThreadLocalRandom.current().nextLong(5_000));

  private final Producer<byte[], byte[]> producer;
  private final CaptureStats stats;
  private final CapturePlan plan;
  private final Databases databases;
  private final CaptureSettings settings;
  private final Clock clock;
  private final ScheduledExecutorService takeOvers = daemon("spillway-capture-standby");
  private final ScheduledExecutorService slotChecks = daemon("spillway-capture-slots");

  /**
   * How long a slot must have streamed to no process before a standing-by instance takes it over:
   * longer than the instance that streamed from it takes to reconnect after losing its connection,
   * so that one keeps it.
   */
  static final Duration TAKE_OVER_AFTER = CaptureEngine.RECONNECT_WAIT.plusSeconds(5);

  /** How long closing waits for the server to let its slots go before marking them so. */
  private static final Duration RELEASE_WAIT = Duration.ofSeconds(5);

  /** Take-overs failing in a row before capture stops. */
  static final int TAKE_OVER_TRIES = 3;

  /** How long closing waits for the producer's last sends. */
  private static final Duration PRODUCER_CLOSE_WAIT = Duration.ofSeconds(5);

  private Capture(
      Producer<byte[], byte[]> producer,
      CaptureStats stats,
      CapturePlan plan,
      Databases databases,
      CaptureSettings settings,
      Clock clock) {
    this.producer = producer;
    this.stats = stats;
    this.plan = plan;
    this.databases = databases;
    this.settings = settings;
    this.clock = clock;
  }

  /**
   * Checks and prepares each source database of the plan and starts its capture; returns once each
   * streams, or stands by: a database whose slot streams to another process (another instance of
   * the installation) is left to it, untouched, and taken over once that one lets the slot go. On
   * failure, whatever started is stopped again.
   *
   * @throws CaptureSetupException when a database cannot be captured as planned
   */
  public static Capture start(
      CapturePlan plan,
      Databases databases,
      CaptureSettings settings,
      CaptureStats stats,
      Clock clock)
      throws InterruptedException {
    return start(plan, databases, settings, stats, clock, SLOT_CHECK_INTERVAL);
  }

  /** As {@link #start(CapturePlan, Databases, CaptureSettings, CaptureStats, Clock)}. */
  static Capture start(
      CapturePlan plan,
      Databases databases,
      CaptureSettings settings,
      CaptureStats stats,
      Clock clock,
      Duration slotCheckInterval)
      throws InterruptedException {
    settings.checkSlotNames(plan.databases());
    for (String db : plan.databases()) {
      SourcePreparation.check(
          db, databases.dataSource(db), plan.tables(db), plan.tables(db, ChangeKind.DELETE));
    }
    Set<String> topics = new LinkedHashSet<>();
    plan.databases().forEach(db -> plan.routes(db).forEach(r -> topics.add(r.topic())));
    boolean inserts =
        plan.databases().stream().anyMatch(db -> plan.kinds(db).contains(ChangeKind.INSERT));
    // Where a row too large goes, kept as every dead-letter topic is.
    List<String> dlq = inserts ? List.of(settings.topics().dlq(Pipeline.BUFFERS)) : List.of();
    TopicProvisioner.ensure(
        settings.bootstrapServers(),
        settings.kafkaProperties(),
        topics,
        dlq,
        settings.partitions(),
        settings.replicationFactor());
    TopicProvisioner.ensureCompacted(
        settings.bootstrapServers(),
        settings.kafkaProperties(),
        settings.topics().captureOffsets(),
        settings.replicationFactor());
    Capture capture = new Capture(newProducer(settings), stats, plan, databases, settings, clock);
    try {
      for (String db : plan.databases()) {
        capture.startOrStandBy(db);
      }
      long every = slotCheckInterval.toMillis();
      capture.slotChecks.scheduleWithFixedDelay(
          () -> {
            for (CaptureEngine engine : capture.engines) {
              try {
                engine.checkSlot();
              } catch (RuntimeException e) {
                // A defect in one check must not end the others, nor those to come.
                log.warn(
                    "Checking the replication slot of database {} failed: {}",
                    engine.database(),
                    e.toString());
              }
              if (engine.slotTaken()) {
                capture.standByAgain(engine);
              }
            }
          },
          every,
          every,
          TimeUnit.MILLISECONDS);
      long look = Math.min(every, TAKE_OVER_CHECK_INTERVAL.toMillis());
      capture.takeOvers.scheduleWithFixedDelay(
          capture::takeOver, look, look, TimeUnit.MILLISECONDS);
      warnOfSlotsLeft(databases, settings, plan.databases());
      return capture;
    } catch (SQLException e) {
      capture.close();
      throw CaptureSetupException.of("Could not prepare capture: " + e.getMessage(), e);
    } catch (RuntimeException | InterruptedException e) {
      capture.close();
      throw e;
    }
  }

  /**
   * Warns of each configured database capture does not read whose slot is still there, idle: left
   * by a configuration that captured a table there, it keeps the server's WAL from then on, and
   * that database's {@code slot-wal} indicator reads it. One look per such database, its connection
   * given up within seconds when the database does not answer.
   */
  public static void warnOfSlotsLeft(
      Databases databases, CaptureSettings settings, Set<String> captured) {
    for (var e : databases.endpoints()) {
      if (captured.contains(e.name())) {
        continue;
      }
      String slot = settings.slotName(e.name());
      try (var c = databases.unpooledSource(e.name()).getConnection();
          var ps = c.prepareStatement(CaptureStatements.IDLE_SLOT_WAL)) {
        ps.setString(1, slot);
        try (var rs = ps.executeQuery()) {
          if (rs.next()) {
            log.warn(
                "Database {} holds replication slot {}, though no table of this configuration is"
                    + " captured there: it keeps the server's {} MB of WAL written since it was"
                    + " last read, and more, until it is dropped (its slot-wal health indicator"
                    + " reads it). Once no table there is to be captured again, drop it and its"
                    + " publication: SELECT pg_drop_replication_slot('{}'); DROP PUBLICATION {};",
                e.name(),
                slot,
                rs.getLong(1) >> 20,
                slot,
                TableName.quote(slot));
          }
        }
      } catch (SQLException | RuntimeException unread) {
        log.debug("Could not look for a slot left in database {}: {}", e.name(), unread.toString());
      }
    }
  }

  /**
   * Starts the database's engine and waits until it streams; when its slot streams to another
   * process, stands by instead.
   *
   * @return whether the database's slot streams to this process
   */
  private boolean startOrStandBy(String db) throws SQLException, InterruptedException {
    CaptureEngine engine =
        new CaptureEngine(
            databases.endpoint(db),
            databases.dataSource(db),
            databases.unpooledSource(db),
            number,
            plan,
            settings,
            producer,
            stats,
            clock);
    engines.add(engine); // closed with the others should closing interrupt its start
    try {
      engine.start(DEFAULT_START_TIMEOUT);
    } catch (SlotBusyException busy) {
      engines.remove(engine);
      closeEngine(engine);
      if (!standingBy.containsKey(db)) {
        standBy(db, busy.getMessage());
      }
      return false;
    } catch (SQLException | RuntimeException e) {
      engines.remove(engine);
      closeEngine(engine);
      throw e;
    }
    stats.standingBy(db, false);
    return true;
  }

  /**
   * Stands by for a database whose slot another process took over while this one's engine
   * reconnected: that one captures now, and this one takes over again once it lets the slot go.
   */
  private void standByAgain(CaptureEngine engine) {
    engines.remove(engine); // it no longer streams: nothing of it is let go when this one closes
    closeEngine(engine);
    // Its slot's WAL is the streaming process's to tell now; not a figure frozen at its last check.
    stats.slot(engine.database(), settings.slotName(engine.database())).set(null, null);
    standBy(engine.database(), "another process took its replication slot over");
  }

  private void standBy(String db, String why) {
    standingBy.put(db, clock.instant());
    stats.standingBy(db, true);
    log.info(
        "Capture of database {} stands by: {}; this process takes it over once that one lets the"
            + " slot go",
        db,
        why);
  }

  /**
   * Takes over each standing-by database whose slot its last process let go when it stopped, at
   * once (claiming the mark that process left, which only one instance finds); or that no process
   * has streamed from for {@link #TAKE_OVER_AFTER} (and a few seconds of this instance's own, so
   * instances standing by for one database do not all start at once), for a process that died
   * leaves no mark. A database out of reach is asked again at the next turn; another instance
   * taking the slot first leaves this one standing by; a take-over that starts and fails {@link
   * #TAKE_OVER_TRIES} times in a row stops capture, as a failing start-up does, and one the
   * database refuses ({@link CaptureSetupException}) at once.
   */
  private void takeOver() {
    for (String db : standingBy.keySet()) {
      if (takeOverFailure != null) {
        return;
      }
      DataSource ds = databases.dataSource(db);
      boolean released;
      try {
        if (SourcePreparation.slotActive(ds, settings.slotName(db))) {
          idleSince.remove(db);
          FailedTakeOvers failed = failedTakeOvers.get(db);
          if (failed != null
              && Duration.between(failed.last(), clock.instant()).compareTo(TAKE_OVER_AFTER) > 0) {
            // Another process streams, long after this one's failed start (whose own stream the
            // server may still show for a moment): the failures were not in a row.
            failedTakeOvers.remove(db);
          }
          continue;
        }
      } catch (SQLException e) {
        idleSince.remove(db); // the database out of reach: idle is not known, asked again later
        continue;
      }
      try {
        released = SourcePreparation.clearReleased(ds, settings.slotName(db));
      } catch (SQLException e) {
        released = false; // as if no mark: the slot is still taken over once idle long enough
      }
      Instant idle = idleSince.computeIfAbsent(db, d -> clock.instant());
      if (!released
          && Duration.between(idle, clock.instant()).compareTo(TAKE_OVER_AFTER.plus(stagger)) < 0) {
        continue;
      }
      idleSince.remove(db);
      try {
        if (startOrStandBy(db)) {
          standingBy.remove(db);
          log.info(
              "Capture of database {} taken over ({}): its slot streams to this process",
              db,
              released ? "its instance stopped and let the slot go" : "its slot was left idle");
        }
        failedTakeOvers.remove(db); // taken over, or another instance took the slot first
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt(); // closing: the engine being started is closed too
        return;
      } catch (SQLException | RuntimeException e) {
        if (closing) {
          return; // the interrupt of closing, surfacing as a failure to connect
        }
        // A statement the database refuses (a table dropped, a right taken away) as a start sees
        // it; the database or Kafka away is tried again.
        RuntimeException failure =
            e instanceof SQLException sql
                ? CaptureSetupException.of(
                    "Capture of database " + db + " could not take over: " + sql.getMessage(), sql)
                : (RuntimeException) e;
        if (failure instanceof CaptureSetupException refused) {
          // Not tried again: the database refuses this installation's capture as configured (its
          // slot another installation's, a right taken away), as it would refuse a start.
          takeOverRefusal = refused;
        } else if (streamsElsewhere(db)) {
          log.info("Capture of database {} stands by on: another instance took the slot first", db);
          continue;
        } else if (count(db) < TAKE_OVER_TRIES) {
          log.warn(
              "Capture of database {} could not take over ({}); it tries again",
              db,
              e.getMessage());
          continue;
        }
        takeOverFailure = "Capture of database " + db + " could not take over: " + e.getMessage();
        log.error("Capture of database {} could not take over: {}", db, e.getMessage());
      }
    }
  }

  /** Counts a failed take-over of the database; the failures in a row so far. */
  private int count(String db) {
    FailedTakeOvers before = failedTakeOvers.get(db);
    int inARow = before == null ? 1 : before.inARow() + 1;
    failedTakeOvers.put(db, new FailedTakeOvers(inARow, clock.instant()));
    return inARow;
  }

  /**
   * Whether a process streams from the database's slot, once this one's engine for it is closed;
   * false when that cannot be asked.
   */
  private boolean streamsElsewhere(String db) {
    try {
      return SourcePreparation.slotActive(databases.dataSource(db), settings.slotName(db));
    } catch (SQLException e) {
      return false;
    }
  }

  /** What {@link #readAgain} did. */
  public enum ReadAgain {
    /** Asked: capture reads the tables' rows and publishes them as inserts once it streams. */
    ASKED,
    /** Capture has not streamed from this database yet: its first start reads every row anyway. */
    AT_FIRST_START,
    /** The slot can no longer stream; its sentence says what to do. */
    SLOT_LOST
  }

  /**
   * Refuses a database answering from a standby, which cannot tell what its slot holds.
   *
   * @throws CaptureSetupException saying so, and what to point the url at
   */
  public static void requirePrimary(DataSource ds, String database) throws SQLException {
    SourcePreparation.requirePrimary(ds, database);
  }

  /**
   * Whether Debezium can be asked to read the table's rows: not when its name has a dot, a space or
   * a quote, which its list of tables to read cannot hold.
   */
  public static boolean readableAgain(TableName table) {
    return CaptureEngine.readsBack(table);
  }

  /**
   * Asks capture of a database to read the rows of {@code tables} again and publish each as an
   * insert, in chunks by primary key beside the stream (an incremental snapshot), whichever process
   * streams from the slot, now or once one starts: for rows whose captured inserts Kafka no longer
   * holds.
   *
   * @param ds the primary's, as {@link #requirePrimary} found: a standby cannot tell what the slot
   *     holds (checked once per database before any buffer is asked)
   * @param slot the database's replication slot ({@link CaptureSettings#slotName})
   * @return what was done; {@link ReadAgain#SLOT_LOST} asks nothing
   */
  public static ReadAgain readAgain(
      DataSource ds, String database, String slot, List<TableName> tables) throws SQLException {
    SourcePreparation.SlotLoss loss = SourcePreparation.slotLoss(ds, database, slot);
    if (loss != null) {
      return loss.gone() ? ReadAgain.AT_FIRST_START : ReadAgain.SLOT_LOST;
    }
    if (!SourcePreparation.notYetRead(ds, slot, tables).isEmpty()) {
      return ReadAgain.AT_FIRST_START; // a table new to a buffer is read when capture next starts
    }
    if (!SourcePreparation.exists(ds, TableName.parse(CaptureStatements.signalTable(slot)))) {
      // Upgraded and not yet started: the first start finds the earlier version's signal table
      // and reads every buffer table once.
      return ReadAgain.AT_FIRST_START;
    }
    SourcePreparation.requestSnapshot(ds, database, slot, tables);
    return ReadAgain.ASKED;
  }

  public CaptureStats stats() {
    return stats;
  }

  /** The databases this process stands by for, and since when. */
  public Map<String, Instant> standingBy() {
    return Map.copyOf(standingBy);
  }

  /**
   * The database's refusal behind {@link #failure()}, when a take-over stopped on one: the process
   * then ends as for a refusal at start (exit 2).
   */
  public Optional<CaptureSetupException> refusal() {
    return Optional.ofNullable(takeOverRefusal);
  }

  /** The first error that stopped a capture engine, if any did. */
  public Optional<String> failure() {
    String takingOver = takeOverFailure;
    if (takingOver != null) {
      return Optional.of(takingOver);
    }
    for (CaptureEngine e : engines) {
      Throwable t = e.failure();
      // One still starting (a take-over) fails its start instead, which takeOver tells: tried
      // again, or left to an instance that took the slot first, not a stop of the process.
      if (t != null && e.started()) {
        return Optional.of("Capture of database " + e.database() + " stopped: " + t.getMessage());
      }
    }
    return Optional.empty();
  }

  private static Producer<byte[], byte[]> newProducer(CaptureSettings settings) {
    return KafkaClients.producer(
        Map.of(
            ProducerConfig.LINGER_MS_CONFIG,
            1,
            ProducerConfig.COMPRESSION_TYPE_CONFIG,
            "lz4",
            ProducerConfig.BATCH_SIZE_CONFIG,
            256 * 1024),
        settings.kafkaProperties(),
        settings.bootstrapServers(),
        "spillway-capture");
  }

  private static ScheduledExecutorService daemon(String name) {
    return Executors.newSingleThreadScheduledExecutor(
        r -> {
          Thread t = new Thread(r, name);
          t.setDaemon(true);
          return t;
        });
  }

  private static void closeEngine(CaptureEngine e) {
    try {
      e.close();
    } catch (IOException | RuntimeException ex) {
      log.warn("Stopping capture of database {} failed: {}", e.database(), ex.getMessage());
    }
  }

  private static void awaitEnd(ExecutorService executor, String what) {
    try {
      if (!executor.awaitTermination(30, TimeUnit.SECONDS)) {
        log.warn("Capture's {} did not end within 30 s", what);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  @Override
  public void close() {
    closing = true;
    // A take-over under way is interrupted; the engine it was starting is closed with the others.
    takeOvers.shutdownNow();
    awaitEnd(takeOvers, "take-over");
    // A check under way may be stopping an engine: it ends before the engines are closed.
    slotChecks.shutdown();
    awaitEnd(slotChecks, "slot check");
    // All at once: with Kafka away each engine waits its bounded close for positions it cannot
    // store, and one after another those waits would add up per database.
    AllAtOnce.run(engines, e -> "spillway-capture-close-" + e.database(), Capture::closeEngine);
    // Only what streamed: an engine whose start was cut short may have found the slot taken.
    List<String> letGo =
        engines.stream().filter(CaptureEngine::started).map(CaptureEngine::database).toList();
    engines.clear();
    // What it still holds belongs to a batch no engine acknowledged (each waits for its sends
    // first): the slot hands it over again, so Kafka out of reach is not waited for long.
    producer.close(PRODUCER_CLOSE_WAIT);
    AllAtOnce.run(letGo, db -> "spillway-capture-release-" + db, this::markReleased);
  }

  /**
   * Tells instances standing by that this process let the database's slot go, so one takes capture
   * over at its next look. Not done when the server still shows the slot streaming after {@link
   * #RELEASE_WAIT}; they then take over once it has been idle long enough.
   */
  private void markReleased(String db) {
    try {
      SourcePreparation.markReleased(databases.dataSource(db), settings.slotName(db), RELEASE_WAIT);
    } catch (SQLException e) {
      log.debug("Could not mark the slot of database {} let go: {}", db, e.getMessage());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
