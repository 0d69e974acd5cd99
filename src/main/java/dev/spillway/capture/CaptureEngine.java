package dev.spillway.capture;

import dev.spillway.event.Pipeline;
import dev.spillway.event.TableName;
import dev.spillway.event.TopicProvisioner;
import dev.spillway.jdbc.DatabaseEndpoint;
import dev.spillway.support.Causes;
import io.debezium.embedded.Connect;
import io.debezium.engine.DebeziumEngine;
import io.debezium.engine.RecordChangeEvent;
import io.debezium.engine.format.ChangeEventFormat;
import java.io.IOException;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.FutureTask;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.IntPredicate;
import java.util.stream.Collectors;
import javax.sql.DataSource;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.json.JsonConverterConfig;
import org.apache.kafka.connect.source.SourceRecord;
import org.postgresql.core.BaseConnection;
import org.postgresql.util.HostSpec;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One Debezium embedded engine reading one source database's logical replication stream. A batch of
 * changes is acknowledged to Debezium (and so, at the next offset flush, to the replication slot)
 * only after Kafka has acknowledged every record of it: a crash at any point leaves each change
 * either in Kafka or still in the slot.
 */
final class CaptureEngine implements AutoCloseable {
  /** How long a slot its last user just left may still show active before it is called in use. */
  private static final Duration SLOT_RELEASE_WAIT = Duration.ofSeconds(5);

  /** How long Debezium waits before it reconnects after losing its connection. */
  static final Duration RECONNECT_WAIT = Duration.ofSeconds(10);

  /**
   * How long Debezium waits before it asks again for a slot the server still holds for another
   * stream. Going on from a stored position, Debezium ends its first stream once it has found its
   * place and starts another at once, which the server may refuse for a moment while the first
   * one's WAL sender exits; Debezium's own wait is 10 s. The same wait comes between its attempts
   * to create a slot that timed out (a statement or lock timeout of Spillway's role), which a
   * slot's first start makes.
   */
  static final Duration SLOT_BUSY_WAIT = Duration.ofSeconds(1);

  /**
   * How long in all Debezium asks for a slot held for another stream, as its own six attempts 10 s
   * apart did: {@code slot.max.retries} is this over {@link #SLOT_BUSY_WAIT}.
   */
  static final Duration SLOT_BUSY_FOR = Duration.ofMinutes(1);

  /** How long closing waits for Debezium's engine to close. */
  static final Duration CLOSE_WAIT = Duration.ofSeconds(15);

  /** How long closing then waits for the engine's threads to end. */
  private static final Duration STOP_WAIT = Duration.ofSeconds(30);

  /** How long capture waits before sending again changes Kafka could not take. */
  static final Duration RESEND_WAIT = Duration.ofSeconds(5);

  /** How often capture says again that Kafka still does not take its changes. */
  private static final Duration REFUSED_REMINDER = Duration.ofMinutes(1);

  /** Debezium's logical name of a captured database is this and the database's name. */
  static final String SERVER_NAME_PREFIX = "spillway-";

  /** The embedded engine's name (and its thread's) is this and the database's name. */
  static final String ENGINE_NAME_PREFIX = "spillway-capture-";

  /**
   * Keys of Debezium's stored position for a change: the one a restart resumes after, and its own.
   */
  private static final String PROCESSED_POSITION = "lsn_proc";

  private static final String POSITION = "lsn";

  private static final Logger log = LoggerFactory.getLogger(CaptureEngine.class);

  private final DatabaseEndpoint endpoint;
  private final DataSource dataSource;

  /** Connections outside the pool, for the start lock. */
  private final DataSource direct;

  /** The number of the {@link Capture} it belongs to, among those of this process. */
  private final int capture;

  private final CapturePlan plan;
  private final CaptureSettings settings;
  private final Producer<byte[], byte[]> producer;
  private final CaptureStats stats;
  private final ChangeMapper mapper;
  private final Clock clock;
  private final AtomicReference<Throwable> failure = new AtomicReference<>();
  private final ExecutorService executor;
  private final CountDownLatch tasksStarted = new CountDownLatch(1);
  private final String slot;
  private volatile boolean stopping;

  private final CaptureStats.SlotWal slotWal;
  private final CaptureStats.HandOver handOver;

  /** Checks in a row that did not find the slot; only {@link #checkSlot} touches it. */
  private int goneReadings;

  /**
   * {@link System#nanoTime()} when the engine last had a batch or began to stream, or a check found
   * its slot idle or could not read it: how long its slot has streamed without a batch here counts
   * from this.
   */
  private volatile long quietSince;

  /** {@link System#nanoTime()} when {@link #start} found the slot streaming. */
  private volatile long streamingSince;

  /** Whether Debezium is handing the engine a batch (waiting on Kafka, perhaps). */
  private volatile boolean inBatch;

  /**
   * The position of the changes the last batch left unacknowledged, or null: on Debezium's thread
   * alone.
   */
  private Object leftAt;

  /**
   * The connection holding the start lock, from the start until {@link #quiet()} after the slot
   * streamed: Debezium, going on from a stored position, ends its first stream once it has found
   * its place and starts another, and another instance starting in between would find the slot
   * idle. Held that long it delays no one: an instance waiting for it stands by once the slot
   * streams.
   */
  private final AtomicReference<Connection> startLock = new AtomicReference<>();

  /** Set once {@link #start} has returned with the slot streaming. */
  private volatile boolean started;

  /** Set once the slot streams and this engine has had nothing from it for {@link #quiet}. */
  private volatile boolean slotTaken;

  /** Set once the engine has ended, on its own or closed. */
  private volatile boolean completed;

  private final AtomicBoolean engineClosed = new AtomicBoolean();

  /** Whether {@link #closeEngine} gave up waiting for the engine to close. */
  private volatile boolean leftClosing;

  private DebeziumEngine<RecordChangeEvent<SourceRecord>> engine;

  /** The tables the start left to join later; null when none. */
  private volatile LateJoins joining;

  CaptureEngine(
      DatabaseEndpoint endpoint,
      DataSource dataSource,
      DataSource direct,
      int capture,
      CapturePlan plan,
      CaptureSettings settings,
      Producer<byte[], byte[]> producer,
      CaptureStats stats,
      Clock clock) {
    this.endpoint = endpoint;
    this.dataSource = dataSource;
    this.direct = direct;
    this.capture = capture;
    this.plan = plan;
    this.settings = settings;
    this.producer = producer;
    this.stats = stats;
    this.clock = clock;
    this.slot = settings.slotName(endpoint.name());
    this.slotWal = stats.slot(endpoint.name(), slot);
    this.handOver = stats.handOver(endpoint.name(), clock);
    this.mapper =
        new ChangeMapper(endpoint.name(), plan, clock, settings.topics().dlq(Pipeline.BUFFERS));
    this.executor =
        Executors.newSingleThreadExecutor(
            r -> {
              Thread t = new Thread(r, ENGINE_NAME_PREFIX + endpoint.name());
              t.setDaemon(true);
              return t;
            });
  }

  String database() {
    return endpoint.name();
  }

  /**
   * Prepares the source, starts the engine and returns once the replication slot streams to it, so
   * every change committed after this returns is captured.
   *
   * @throws SlotBusyException when the slot streams to another process, or another process is
   *     starting capture from it, before anything is changed
   */
  void start(Duration timeout) throws SQLException, InterruptedException {
    // Held until the engine streams for good, so another instance starting finds it streaming.
    SourcePreparation.StartLock lock =
        SourcePreparation.lockStart(direct, dataSource, slot, timeout);
    if (lock.held() == null) {
      // Another installation's slot of the same name is not stood by for: a process streaming
      // from it, or starting to, marked its publication first.
      checkOwner();
      throw lock.slotStreams()
          ? streamsToAnother()
          : new SlotBusyException(
              "Another process (another instance of this installation) has been starting capture"
                  + " from replication slot "
                  + slot
                  + " of database "
                  + endpoint.name()
                  + " for "
                  + timeout.toSeconds()
                  + " s; nothing was changed");
    }
    startLock.set(lock.held());
    boolean streaming = false;
    try {
      checkOwner(); // nor taken over
      startLocked(timeout);
      streaming = true;
    } finally {
      if (!streaming) {
        releaseStartLock();
      }
    }
  }

  private SlotBusyException streamsToAnother() {
    return new SlotBusyException(
        "Replication slot "
            + slot
            + " of database "
            + endpoint.name()
            + " streams to another process (another instance of this installation);"
            + " nothing was changed");
  }

  /** Lets the start lock go, if this engine still holds it. */
  private void releaseStartLock() {
    Connection lock = startLock.getAndSet(null);
    if (lock != null) {
      try {
        lock.close(); // the server lets a session's advisory locks go with it
      } catch (SQLException e) {
        log.debug(
            "Capture of database {} could not close its start lock's connection: {}",
            endpoint.name(),
            e.getMessage());
      }
    }
  }

  private void checkOwner() throws SQLException {
    SourcePreparation.checkOwner(dataSource, endpoint.name(), slot, owner());
  }

  /** What this installation's publication of the database is marked with. */
  private String owner() {
    return SourcePreparation.owner(settings.topics().prefix(), endpoint.name());
  }

  private void startLocked(Duration timeout) throws SQLException, InterruptedException {
    if (!SourcePreparation.slotReleased(dataSource, slot, SLOT_RELEASE_WAIT)) {
      // Another process streams from it; changing the publication under it would change what it
      // captures, and the slot would not stream to this one anyway.
      throw streamsToAnother();
    }
    // A slot that is gone is made anew below; one the server invalidated is the operator's to drop.
    SourcePreparation.SlotLoss loss = SourcePreparation.slotLoss(dataSource, endpoint.name(), slot);
    if (loss != null && !loss.gone()) {
      throw new SlotUnavailableException(loss.sentence());
    }
    boolean created = loss != null; // gone (check() has refused a standby, which cannot tell)
    // Rows already in a buffer table when capture first reads it were inserted before the slot
    // or the publication could keep them: a snapshot reads them once. A new slot starts at the
    // present, so then every buffer table's rows are unread.
    List<TableName> inserted = List.copyOf(plan.tables(endpoint.name(), ChangeKind.INSERT));
    // Read only for a slot made anew: whether capture had run (the warning below).
    boolean published = created && SourcePreparation.publishesApplicationTables(dataSource, slot);
    if (created) {
      SourcePreparation.checkSlotNameFree(dataSource, endpoint.name(), slot);
      // Before the slot is made: a start ending in between leaves no slot, and the next one clears
      // them again, where one after the slot would leave positions no slot holds.
      forgetPositions();
      SourcePreparation.beforeANewSlot(dataSource, slot);
      SourcePreparation.createSlot(dataSource, slot);
    }
    List<TableName> unread =
        created || publishesSharedSignals() || SourcePreparation.rereadMarked(dataSource, slot)
            ? inserted
            : SourcePreparation.notYetRead(dataSource, slot, inserted);
    SourcePreparation.Asked asked;
    try {
      asked =
          SourcePreparation.prepare(
              slot,
              owner(),
              dataSource,
              plan.tables(endpoint.name()),
              plan.kinds(endpoint.name()),
              inserted,
              unread);
      if (published) {
        log.warn(
            "Capture of database {}: replication slot {} was gone, though its publication"
                + " exists; made a new one, which starts at the present: {}.",
            endpoint.name(),
            slot,
            SourcePreparation.AFTER_A_LOST_SLOT);
      }
    } catch (SQLException | RuntimeException e) {
      // The publication is as it was: a slot made by this start goes too, or the next start would
      // take the tables it publishes for read, and the slot would hold WAL meanwhile.
      if (created) {
        try {
          SourcePreparation.dropSlot(dataSource, slot);
        } catch (SQLException dropping) {
          e.addSuppressed(dropping);
        }
      }
      throw e;
    }
    if (!asked.now().isEmpty()) {
      log.info(
          "Capture of database {}: reading the rows already in {} once (incremental snapshot)",
          endpoint.name(),
          asked.now().stream().map(TableName::displayName).collect(Collectors.joining(", ")));
    }
    // A beat the slot keeps, so the engine has a change to store a position by before the first
    // captured one: without any, Debezium takes a slot gone before that for a first start and
    // makes it anew, and the inserts it leaves unacknowledged (acknowledgeable) give it none.
    SourcePreparation.beat(dataSource);
    // Debezium reads the signal from the stream, so a table may join before the engine runs.
    joining = LateJoins.start(dataSource, endpoint.name(), slot, asked.later());
    plan.routes(endpoint.name()).forEach(stats::register);
    ReconnectLogFilter.captureStarts(endpoint.name()); // an earlier engine's loss is not this one's
    engine =
        DebeziumEngine.create(ChangeEventFormat.of(Connect.class))
            .using(debeziumProperties())
            .using(clock)
            .using(
                (success, message, error) -> {
                  completed = true;
                  if (!success && !stopping) {
                    Throwable cause =
                        explained(error != null ? error : new IllegalStateException(message));
                    failure.compareAndSet(null, cause);
                    if (cause instanceof SlotUnavailableException) {
                      log.error(
                          "Capture of database {} stopped: {}",
                          endpoint.name(),
                          cause.getMessage());
                    } else {
                      log.error(
                          "Capture of database {} stopped: {}", endpoint.name(), message, error);
                    }
                  }
                })
            .using(
                new DebeziumEngine.ConnectorCallback() {
                  @Override
                  public void taskStarted() {
                    tasksStarted.countDown();
                  }
                })
            .notifying(this::handleBatch)
            .build();
    executor.execute(engine);
    long deadline = System.nanoTime() + timeout.toNanos();
    // Streaming can begin before the engine counts its task as started, and an engine closed in
    // between refuses to stop ("tasks are starting") and keeps its metrics registered.
    while (tasksStarted.getCount() > 0 || !SourcePreparation.slotActive(dataSource, slot)) {
      Throwable f = failure.get();
      if (f instanceof SlotUnavailableException lost) {
        throw lost;
      }
      if (f != null) {
        throw CaptureSetupException.of(
            "Capture of database "
                + endpoint.name()
                + " could not start: "
                + Causes.root(f).getMessage(),
            f);
      }
      if (System.nanoTime() > deadline) {
        SourcePreparation.SlotLoss lost =
            SourcePreparation.slotLoss(dataSource, endpoint.name(), slot);
        if (lost != null) {
          throw new SlotUnavailableException(lost.sentence());
        }
        // Not the database's refusal (that fails the engine): it, or the machine, is slow.
        throw new IllegalStateException(
            "Capture of database "
                + endpoint.name()
                + " did not start streaming within "
                + timeout.toSeconds()
                + " s.");
      }
      Thread.sleep(20);
    }
    streamingSince = System.nanoTime();
    quietSince = streamingSince;
    started = true;
    clearReleaseMark();
    log.info(
        "Capturing {} from database {} (slot {})",
        plan.routes(endpoint.name()).stream()
            .map(r -> r.kind() + " " + r.table())
            .collect(Collectors.joining(", ")),
        endpoint.name(),
        slot);
  }

  /**
   * Stops the engine, with what an operator must know as its failure, once its slot can no longer
   * stream (invalidated by the server, or gone): Debezium would go on retrying it, capturing
   * nothing. Stopping is for good and the next start makes a slot anew, so a slot is taken for gone
   * only when two checks in a row did not find it; one that cannot be read now is looked at again
   * next time.
   */
  void checkSlot() {
    if (!started || stopping || failure.get() != null) {
      return; // a start under way makes the slot, or waits for it: it is not checked meanwhile
    }
    if (System.nanoTime() - streamingSince >= quiet().toNanos()) {
      releaseStartLock(); // Debezium's first stream and the one after it are long under way
    }
    SourcePreparation.SlotLoss loss;
    try {
      loss = SourcePreparation.slotLoss(dataSource, endpoint.name(), slot, slotWal);
    } catch (SQLException e) {
      slotWal.set(null, null);
      quietSince = System.nanoTime(); // out of reach: Debezium too reconnects once it is back
      return;
    }
    if (loss == null) {
      goneReadings = 0;
      if (takenOver()) {
        slotTaken = true;
        log.info(
            "Capture of database {}: replication slot {} streams, and not to this process, which"
                + " has had nothing from it for {} s: another process (another instance of this"
                + " installation) took it over while this one reconnected",
            endpoint.name(),
            slot,
            quiet().toSeconds());
        return;
      }
      checkPublished();
      clearReleaseMark();
      return;
    }
    if (loss.gone() && ++goneReadings < 2) {
      return;
    }
    stop(new SlotUnavailableException(loss.sentence()));
  }

  /**
   * Whether the slot streams to another process: it streams, and this engine, which while it
   * streams gets at least a heartbeat every {@code heartbeat-interval}, has had nothing for {@link
   * #quiet()} since its last batch or since a check last found the slot idle or out of reach, and
   * has no batch in hand (waiting on Kafka, say). A slot the server still holds for this process's
   * own lost connection (until {@code wal_sender_timeout}) looks the same; the process then stands
   * by, and it or another takes the slot over once it has been idle long enough.
   */
  private boolean takenOver() {
    try {
      if (!SourcePreparation.slotActive(dataSource, slot)) {
        quietSince = System.nanoTime(); // Debezium reconnects: its next stream is counted from now
        return false;
      }
    } catch (SQLException e) {
      quietSince = System.nanoTime();
      return false;
    }
    // In this order: a batch ends by setting quietSince, then inBatch.
    return !inBatch && System.nanoTime() - quietSince >= quiet().toNanos();
  }

  private Duration quiet() {
    return quiet(settings.heartbeatInterval());
  }

  /**
   * How long an engine whose slot streams goes without a batch at most while the stream is its own:
   * its last heartbeat before losing its connection, the wait before it reconnects, a few seconds
   * for Debezium to start streaming again, and the first heartbeat after.
   */
  static Duration quiet(Duration heartbeat) {
    return heartbeat.multipliedBy(2).plus(RECONNECT_WAIT).plusSeconds(5);
  }

  /**
   * Takes back a mark that the slot was let go, left by the process that streamed before this one
   * or written late (after this one began to stream) by a process that stopped: left, it would hand
   * the slot to an instance standing by the next time this one reconnects. Done once streaming and
   * at each slot check, which also tries again after a failure here.
   */
  private void clearReleaseMark() {
    try {
      SourcePreparation.clearReleased(dataSource, slot);
    } catch (SQLException e) {
      log.debug(
          "Capture of database {} could not take back a release mark: {}",
          endpoint.name(),
          e.getMessage());
    }
  }

  /**
   * Whether the engine found that another process took its slot over: it streamed, lost its
   * connection, and while it reconnected an instance standing by found the slot idle long enough
   * and took it (the network between this process and the server cut for longer than the other's
   * wait, say). Debezium would ask for the slot again and again; {@link Capture} closes the engine
   * and stands by instead.
   */
  boolean slotTaken() {
    return slotTaken;
  }

  /** Whether the engine streamed: its start returned. */
  boolean started() {
    return started;
  }

  /**
   * Stops capture when a table it reads has left the publication: dropped (and perhaps made again)
   * while capture ran, its changes no longer come, and nothing else would say so. A start publishes
   * it again, and reads a buffer table's rows once.
   */
  private void checkPublished() {
    // Read first: a table joining between the two readings is then not taken for one that left.
    LateJoins join = joining;
    Set<TableName> notYet = join == null ? Set.of() : join.waiting();
    List<TableName> left;
    try {
      left =
          SourcePreparation.unpublished(dataSource, slot, plan.tables(endpoint.name())).stream()
              .filter(t -> !notYet.contains(t))
              .toList();
    } catch (SQLException e) {
      return; // asked again at the next check
    }
    if (!left.isEmpty()) {
      stop(
          new IllegalStateException(
              "Table "
                  + left.stream().map(TableName::displayName).collect(Collectors.joining(", "))
                  + " left publication "
                  + slot
                  + " while capture ran (dropped, dropped and made again, or renamed), so its"
                  + " changes are no longer captured; start Spillway again to capture it (a"
                  + " buffer table's rows are then read once; a table renamed stays published"
                  + " under its new name, so once that name is configured, run `bin/spillway"
                  + " buffers reread NAME` for a buffer's rows, or `bin/spillway lfk sweep` for"
                  + " a parent's deletes, made since the rename)."));
    }
  }

  /**
   * Whether the publication still carries a signal table an earlier version gave the slot (the one
   * every slot shared before each had its own, or for a long slot name one named otherwise): a
   * snapshot asked there and not yet read (a start's, or {@code buffers reread}'s while Spillway
   * was stopped) would be lost with it, so every buffer table is read again once; a row read twice
   * is handled once.
   */
  private boolean publishesSharedSignals() throws SQLException {
    List<TableName> earlier =
        CaptureStatements.earlierSignalTables(slot).stream().map(TableName::parse).toList();
    return SourcePreparation.unpublished(dataSource, slot, earlier).size() < earlier.size();
  }

  /** Ends the engine with a failure of capture's own, not one of the engine's. */
  private void stop(RuntimeException why) {
    stopping = true; // the engine's end is this, not an error of its own
    LateJoins join = joining;
    if (join != null) {
      join.close();
    }
    releaseStartLock();
    failure.compareAndSet(null, why);
    log.error("Capture of database {} stopped: {}", endpoint.name(), why.getMessage());
    try {
      closeEngine();
    } catch (IOException | RuntimeException e) {
      log.warn("Stopping capture of database {} failed: {}", endpoint.name(), e.getMessage());
    }
  }

  /**
   * The error an engine stopped with, or, when its slot can no longer stream, what an operator must
   * know of that: Debezium tells a vanished slot as a position "no longer available".
   */
  private Throwable explained(Throwable error) {
    try {
      SourcePreparation.SlotLoss loss =
          SourcePreparation.slotLoss(dataSource, endpoint.name(), slot);
      return loss == null ? error : new SlotUnavailableException(loss.sentence());
    } catch (SQLException | RuntimeException e) {
      return error;
    }
  }

  /**
   * Closes the engine once, unless it has ended on its own (it may then refuse to close), waiting
   * at most {@link #CLOSE_WAIT}: its last positions go to Kafka as it closes, and while Kafka is
   * out of reach that would wait for ever. Left closing then, capture stops without them, and the
   * changes since the last stored position are read again at the next start.
   *
   * @return false when it was left closing
   */
  private boolean closeEngine() throws IOException {
    if (engine == null || completed) {
      return true;
    }
    if (!engineClosed.compareAndSet(false, true)) {
      return !leftClosing; // closed before: by a slot check's stop, say
    }
    FutureTask<Void> closing =
        new FutureTask<>(
            () -> {
              closeOnceTasksStarted(engine, () -> completed, TASKS_START_WAIT, TASKS_START_CHECK);
              return null;
            });
    Thread closer = new Thread(closing, "spillway-capture-close-" + endpoint.name());
    closer.setDaemon(true);
    closer.start();
    try {
      closing.get(CLOSE_WAIT.toMillis(), TimeUnit.MILLISECONDS);
      return true;
    } catch (TimeoutException e) {
      log.warn(
          "Capture of database {} stops without Debezium's last positions, which it could not"
              + " store in Kafka within {} s (Kafka out of reach, or Debezium's tasks still"
              + " starting: it is closed once they have); the changes since the last stored one"
              + " are read again at the next start",
          endpoint.name(),
          CLOSE_WAIT.toSeconds());
      leftClosing = true;
      return false;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      leftClosing = true;
      return false;
    } catch (ExecutionException e) {
      if (e.getCause() instanceof IOException io) {
        throw io;
      }
      if (e.getCause() instanceof RuntimeException r) {
        throw r;
      }
      throw new IllegalStateException(e.getCause());
    }
  }

  /**
   * Closes {@code engine}, asking again while Debezium refuses because its tasks are still starting
   * (a start given up on while its task retries the database, say): an engine left so would stream,
   * unwatched, once they have started. Gives up once the engine has {@code ended} on its own, or
   * after {@code within}, rethrowing the refusal then; any other failure at once.
   */
  static void closeOnceTasksStarted(
      java.io.Closeable engine,
      java.util.function.BooleanSupplier ended,
      Duration within,
      Duration every)
      throws IOException, InterruptedException {
    long until = System.nanoTime() + within.toNanos();
    while (true) {
      try {
        engine.close();
        return;
      } catch (IllegalStateException e) {
        if (e.getMessage() == null || !e.getMessage().contains(TASKS_STARTING)) {
          throw e;
        }
        if (ended.getAsBoolean()) {
          return;
        }
        if (System.nanoTime() > until) {
          throw e;
        }
        Thread.sleep(every.toMillis());
      }
    }
  }

  /** What Debezium's engine says when asked to close while its tasks start. */
  private static final String TASKS_STARTING = "while tasks are starting";

  /**
   * How long closing goes on asking an engine whose tasks are starting: Debezium's own retries of
   * the slot take up to a minute.
   */
  private static final Duration TASKS_START_WAIT = Duration.ofSeconds(90);

  private static final Duration TASKS_START_CHECK = Duration.ofMillis(100);

  /**
   * Removes the positions Debezium kept for this database's capture, before a slot just made
   * streams: they belong to a slot dropped since, and Debezium would refuse to start from a
   * position the new slot does not hold (or carry on an incremental snapshot that slot never asked
   * for). A tombstone for its key, as Kafka Connect writes one; without the topic there is nothing
   * to forget.
   */
  private void forgetPositions() throws InterruptedException {
    forgetPositions(settings, producer, endpoint.name());
  }

  /** {@link #forgetPositions()} of a database's capture, sent through {@code producer}. */
  static void forgetPositions(
      CaptureSettings settings, Producer<byte[], byte[]> producer, String database)
      throws InterruptedException {
    String topic = settings.topics().captureOffsets();
    if (!TopicProvisioner.exists(settings.bootstrapServers(), settings.kafkaProperties(), topic)) {
      return;
    }
    try (JsonConverter keys = new JsonConverter()) {
      keys.configure(Map.of(JsonConverterConfig.SCHEMAS_ENABLE_CONFIG, "false"), true);
      byte[] key =
          keys.fromConnectData(
              engineName(database),
              null,
              List.of(engineName(database), Map.of("server", serverName(database))));
      producer.send(new ProducerRecord<>(topic, key, null)).get(30, TimeUnit.SECONDS);
    } catch (ExecutionException | TimeoutException e) {
      throw new IllegalStateException(
          "Could not clear the capture positions of database "
              + database
              + " in "
              + topic
              + ": "
              + e.getMessage(),
          e);
    }
  }

  /** Debezium's name for a database's engine: the namespace of its positions. */
  private static String engineName(String database) {
    return ENGINE_NAME_PREFIX + database;
  }

  /** Debezium's name for a database's source: the partition of its positions. */
  private static String serverName(String database) {
    return SERVER_NAME_PREFIX + database;
  }

  /** The error that stopped this engine, or null while it runs. */
  Throwable failure() {
    return failure.get();
  }

  private void handleBatch(
      List<RecordChangeEvent<SourceRecord>> batch,
      DebeziumEngine.RecordCommitter<RecordChangeEvent<SourceRecord>> committer)
      throws InterruptedException {
    inBatch = true;
    try {
      handle(batch, committer);
    } finally {
      quietSince = System.nanoTime();
      inBatch = false;
    }
  }

  private void handle(
      List<RecordChangeEvent<SourceRecord>> batch,
      DebeziumEngine.RecordCommitter<RecordChangeEvent<SourceRecord>> committer)
      throws InterruptedException {
    List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>(batch.size());
    List<ChangeMapper.Mapped> mapped = new ArrayList<>(batch.size());
    boolean[] published = new boolean[batch.size()];
    for (int i = 0; i < batch.size(); i++) {
      Optional<ChangeMapper.Mapped> m = mapper.map(batch.get(i).record());
      if (m.isPresent()) {
        records.add(m.get().record());
        mapped.add(m.get());
        published[i] = true;
      }
    }
    // Closing the engine interrupts the batch in hand. Records already sent are finished and
    // acknowledged anyway: releasing them would publish them a second time after a restart.
    boolean interrupted = handOver(producer, records, handOver, RESEND_WAIT, Thread.interrupted());
    for (ChangeMapper.Mapped m : mapped) {
      stats.published(m.route());
      if (m.tooLarge()) {
        stats.tooLarge(m.route());
      }
    }
    try {
      int acknowledged = acknowledgeable(batch, i -> published[i], leftAt);
      if (!batch.isEmpty()) {
        leftAt =
            acknowledged < batch.size() ? position(batch.get(batch.size() - 1).record()) : null;
      }
      for (int i = 0; i < acknowledged; i++) {
        committer.markProcessed(batch.get(i));
      }
      committer.markBatchFinished();
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /**
   * How many of the batch's first changes may be acknowledged: all of them, but for the published
   * inserts at its end that share the last one's position, left for a later batch to acknowledge.
   * COPY writes the rows of a page in one WAL record, so they share its position, and a restart
   * resumes after the last position acknowledged, passing over every change still at it: rows of
   * the page beyond the batch's end would never be published. Left unacknowledged, they are
   * published again after a restart instead (each pipeline takes a change twice as once). Other
   * changes each have a position of their own, and the rows of a page are of one table: published
   * all, or none.
   *
   * <p>Until a change at another position comes, nothing at that position is acknowledged, a
   * heartbeat Debezium sends while the stream is slow among them: it carries the position too.
   *
   * @param published whether the batch's change at an index went to Kafka
   * @param leftAt the position of the changes the batch before left unacknowledged, or null
   */
  static int acknowledgeable(
      List<RecordChangeEvent<SourceRecord>> batch, IntPredicate published, Object leftAt) {
    int end = batch.size();
    if (end == 0) {
      return 0;
    }
    Object last = position(batch.get(end - 1).record());
    if (last == null) {
      return end;
    }
    int start = end;
    boolean inserts = false;
    while (start > 0 && last.equals(position(batch.get(start - 1).record()))) {
      start--;
      inserts |= published.test(start) && isInsert(batch.get(start).record());
    }
    return inserts || last.equals(leftAt) ? start : end;
  }

  /** Where a restart resumes after this change: the position Debezium stores for it. */
  private static Object position(SourceRecord record) {
    Map<String, ?> offset = record.sourceOffset();
    if (offset == null) {
      return null;
    }
    Object processed = offset.get(PROCESSED_POSITION);
    return processed != null ? processed : offset.get(POSITION);
  }

  private static boolean isInsert(SourceRecord record) {
    return record.value() instanceof Struct value
        && value.schema().field("op") != null
        && "c".equals(value.getString("op"));
  }

  /**
   * Hands the records to Kafka and waits until it has them all. While Kafka cannot take them (a
   * retriable failure: it is out of reach, say) they are all sent again every {@code wait}, so some
   * may be published twice (each pipeline takes a change twice as once); nothing is acknowledged to
   * the server meanwhile, which keeps the changes; {@code state} says since when the batch waits.
   * Any other failure throws.
   *
   * @param interrupted whether the engine was already closing: then a failure ends the wait
   * @return whether the thread was interrupted (the sends already made were waited for anyway)
   * @throws InterruptedException when the engine closes during a wait: nothing is acknowledged
   */
  static boolean handOver(
      Producer<byte[], byte[]> producer,
      List<ProducerRecord<byte[], byte[]>> records,
      CaptureStats.HandOver state,
      Duration wait,
      boolean interrupted)
      throws InterruptedException {
    String database = state.database();
    long refusedSince = 0;
    long saidAt = 0;
    state.sending();
    try {
      while (true) {
        try {
          interrupted |= sendAll(producer, records);
          break;
        } catch (KafkaException e) {
          if (interrupted || Thread.interrupted() || e instanceof InterruptException) {
            // Capture is stopping: nothing of this batch is acknowledged, it is read again.
            throw new InterruptedException("capture of database " + database + " stopping");
          }
          if (!(e instanceof RetriableException || e.getCause() instanceof RetriableException)) {
            // Nothing of this batch is acknowledged: after a restart the slot hands it over again.
            throw new IllegalStateException(
                "Kafka refused "
                    + records.size()
                    + " captured changes of database "
                    + database
                    + ": "
                    + e.getMessage(),
                e);
          }
          long now = System.nanoTime();
          state.refused(e.getMessage());
          if (refusedSince == 0) {
            refusedSince = now;
            saidAt = now;
            log.warn(
                "Capture of database {} cannot hand {} changes to Kafka ({}); it sends them again"
                    + " until Kafka takes them, and acknowledges nothing to the server meanwhile,"
                    + " which keeps them",
                database,
                records.size(),
                e.getMessage());
          } else if (now - saidAt >= REFUSED_REMINDER.toNanos()) {
            saidAt = now;
            log.warn(
                "Capture of database {} has not handed {} changes to Kafka for {} min ({}); its"
                    + " replication slot keeps the WAL meanwhile",
                database,
                records.size(),
                Duration.ofNanos(now - refusedSince).toMinutes(),
                e.getMessage());
          }
          Thread.sleep(wait.toMillis());
        }
      }
    } finally {
      state.ended(); // taken, or no longer this capture's to send
    }
    if (refusedSince != 0) {
      log.info("Capture of database {} hands changes to Kafka again", database);
    }
    return interrupted;
  }

  /**
   * Sends the records and waits until Kafka has them all. A failure throws the {@link
   * KafkaException} behind the first, once every send has ended, so a batch sent again never
   * overlaps the attempt before it; the thread is then left interrupted if it was meanwhile.
   *
   * @return whether the thread was interrupted meanwhile (the wait went on regardless)
   */
  private static boolean sendAll(
      Producer<byte[], byte[]> producer, List<ProducerRecord<byte[], byte[]>> records) {
    List<Future<RecordMetadata>> sends = new ArrayList<>(records.size());
    KafkaException failed = null;
    for (ProducerRecord<byte[], byte[]> r : records) {
      try {
        sends.add(producer.send(r));
      } catch (KafkaException e) {
        failed = e; // Kafka out of reach for max.block.ms: what was sent is still waited for
        break;
      }
    }
    boolean interrupted = false;
    for (Future<RecordMetadata> send : sends) {
      while (true) {
        try {
          send.get();
          break;
        } catch (InterruptedException e) {
          interrupted = true;
        } catch (ExecutionException e) {
          if (failed == null) {
            failed =
                e.getCause() instanceof KafkaException k ? k : new KafkaException(e.getCause());
          }
          break;
        }
      }
    }
    if (failed != null) {
      if (interrupted) {
        Thread.currentThread().interrupt(); // the stop, not the failure, ends the hand-over
      }
      throw failed;
    }
    return interrupted;
  }

  /**
   * The URL's TLS settings ({@code sslmode}, {@code sslrootcert}, {@code sslfactory}, ...) as
   * Debezium's settings, which it hands to the driver: its connection would otherwise go without
   * them. A bare {@code ssl} without {@code sslmode} is {@code verify-full}, as the driver takes
   * it.
   */
  static Map<String, String> tlsSettings(Properties url) {
    Map<String, String> tls = new java.util.TreeMap<>();
    for (String key : url.stringPropertyNames()) {
      if (key.startsWith("ssl") && !key.equals("ssl")) {
        tls.put("database." + key, url.getProperty(key));
      }
    }
    String ssl = url.getProperty("ssl");
    if (url.getProperty("sslmode") == null
        && ssl != null
        && (ssl.isEmpty() || Boolean.parseBoolean(ssl))) {
      tls.put("database.sslmode", "verify-full");
    }
    return tls;
  }

  private Properties debeziumProperties() throws SQLException {
    Properties p = new Properties();
    p.putAll(settings.kafkaProperties());
    p.setProperty("name", engineName(endpoint.name()));
    p.setProperty("connector.class", "io.debezium.connector.postgresql.PostgresConnector");
    p.setProperty("topic.prefix", serverName(endpoint.name()));
    p.setProperty("custom.metric.tags", "capture=" + capture);
    // Where the pool's connections are, which made the slot: with several hosts in the URL (a
    // primary and its standbys, targetServerType=primary), the one that answered as asked.
    HostSpec reached;
    try (Connection c = dataSource.getConnection()) {
      reached = c.unwrap(BaseConnection.class).getQueryExecutor().getHostSpec();
    }
    p.setProperty("database.hostname", reached.getHost());
    p.setProperty("database.port", String.valueOf(reached.getPort()));
    p.setProperty("database.dbname", endpoint.databaseName());
    p.putAll(tlsSettings(endpoint.parsedUrl()));
    p.setProperty("database.user", endpoint.username());
    if (endpoint.password() != null) {
      p.setProperty("database.password", endpoint.password());
    }
    p.setProperty("plugin.name", "pgoutput");
    p.setProperty("slot.name", slot);
    p.setProperty("slot.drop.on.stop", "false");
    p.setProperty("publication.name", slot);
    // The publication is ours (SourcePreparation): the kinds routed, via partition root.
    p.setProperty("publication.autocreate.mode", "disabled");
    p.setProperty("snapshot.mode", "no_data");
    // Rows a table held before capture read it come by incremental snapshot (SourcePreparation).
    p.setProperty("signal.data.collection", CaptureStatements.signalTable(slot));
    p.setProperty("signal.enabled.channels", "source");
    // Watermarks as inserts (the default): a database holding only buffer tables publishes no
    // deletes, and a window closed by one would never close.
    p.setProperty("incremental.snapshot.watermarking.strategy", "insert_insert");
    p.setProperty("table.include.list", includeList());
    p.setProperty("skipped.operations", "u,t");
    p.setProperty("tombstones.on.delete", "false");
    p.setProperty("decimal.handling.mode", "string");
    // Each column's PostgreSQL type in its schema's parameters: numeric's NaN and infinities come
    // as Debezium's words, put back as PostgreSQL writes them by the mapper.
    p.setProperty("column.propagate.source.type", ".*");
    p.setProperty("time.precision.mode", "adaptive_time_microseconds");
    // ISO-8601 text (P1Y2M3DT4H), exact and castable back; the default is approximate microseconds.
    p.setProperty("interval.handling.mode", "string");
    p.setProperty("poll.interval.ms", String.valueOf(settings.pollInterval().toMillis()));
    p.setProperty("max.batch.size", String.valueOf(settings.maxBatchSize()));
    p.setProperty("max.queue.size", String.valueOf(settings.maxBatchSize() * 4));
    p.setProperty("retriable.restart.connector.wait.ms", String.valueOf(RECONNECT_WAIT.toMillis()));
    p.setProperty("slot.retry.delay.ms", String.valueOf(SLOT_BUSY_WAIT.toMillis()));
    p.setProperty(
        "slot.max.retries", String.valueOf(SLOT_BUSY_FOR.toMillis() / SLOT_BUSY_WAIT.toMillis()));
    p.setProperty("heartbeat.interval.ms", String.valueOf(settings.heartbeatInterval().toMillis()));
    p.setProperty("heartbeat.action.query", CaptureStatements.HEARTBEAT_ACTION);
    p.setProperty("offset.storage", "org.apache.kafka.connect.storage.KafkaOffsetBackingStore");
    p.setProperty("offset.storage.topic", settings.topics().captureOffsets());
    p.setProperty("offset.storage.partitions", "1");
    p.setProperty(
        "offset.storage.replication.factor", String.valueOf(settings.replicationFactor()));
    p.setProperty(
        "offset.flush.interval.ms", String.valueOf(settings.offsetFlushInterval().toMillis()));
    p.setProperty("bootstrap.servers", settings.bootstrapServers());
    return p;
  }

  private String includeList() {
    List<String> patterns = new ArrayList<>();
    for (TableName t : plan.tables(endpoint.name())) {
      patterns.add(regex(t.toString()));
    }
    patterns.add(regex(CaptureStatements.HEARTBEAT_TABLE));
    patterns.add(regex(CaptureStatements.signalTable(slot)));
    return String.join(",", patterns);
  }

  /**
   * How a snapshot signal names a table: as a literal pattern, which Debezium matches against the
   * identifiers of its tables. It then reads the identifier it matched, and later the same text
   * kept in its offsets (unquoted there), as {@code schema.table} split at dots and spaces: a table
   * whose name holds a dot, a space or a quote would be taken for another (or none, or fail every
   * restart), so it is refused in one sentence.
   *
   * @throws CaptureSetupException for such a name
   */
  static String snapshotName(TableName t) {
    if (!readsBack(t)) {
      throw new CaptureSetupException(
          "Table "
              + t
              + " holds rows from before capture could read it, and Debezium cannot be asked to"
              + " read a table whose name has a dot, a space or a quote; rename the table, or"
              + " move its rows out and insert them again once Spillway runs.");
    }
    return regex(t.toString());
  }

  static boolean readsBack(TableName t) {
    return readsBack(t.schema()) && readsBack(t.table());
  }

  private static boolean readsBack(String part) {
    return part.chars()
        .noneMatch(c -> c == '.' || c == '"' || c == '\'' || c == '`' || Character.isWhitespace(c));
  }

  /**
   * A table's name as a pattern Debezium's include list matches literally: a backslash before every
   * character but letters, digits and underscores, which also keeps a comma in a name from
   * splitting the list.
   */
  static String regex(String table) {
    StringBuilder out = new StringBuilder(table.length() + 8);
    table
        .codePoints()
        .forEach(
            c -> {
              if (!Character.isLetterOrDigit(c) && c != '_') {
                out.append('\\');
              }
              out.appendCodePoint(c);
            });
    return out.toString();
  }

  @Override
  public void close() throws IOException {
    stopping = true;
    LateJoins join = joining;
    if (join != null) {
      join.close();
    }
    releaseStartLock();
    boolean closed = false;
    try {
      // The executor is shut down whatever closing did, so its threads do not outlive the capture.
      closed = closeEngine();
    } finally {
      executor.shutdown();
      try {
        // An engine left closing keeps its threads: they are not waited for long.
        Duration wait = closed ? STOP_WAIT : Duration.ofSeconds(1);
        if (!executor.awaitTermination(wait.toMillis(), TimeUnit.MILLISECONDS)) {
          log.warn(
              "Capture of database {} did not stop within {} s", endpoint.name(), wait.toSeconds());
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }
}
