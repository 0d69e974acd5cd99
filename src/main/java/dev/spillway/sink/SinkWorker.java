package dev.spillway.sink;

import dev.spillway.health.HealthGate;
import dev.spillway.support.Backoff;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Deque;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.errors.WakeupException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One consumer of a pipeline's batches topics and the threads running its batches. The consumer
 * group is the claim: a batch belongs to whoever owns its partition. Per partition one batch runs
 * at a time, so offsets are committed in order and only after the batch's outcome is settled (done,
 * re-enqueued, delayed or dead-lettered). A partition holding work, or whose next batch targets a
 * table at STOP, or whose head batch ended paused at a table still at STOP, is paused: Kafka keeps
 * the backlog and the worker claims only what it can run. Once that table has been at STOP for
 * {@code step-aside-after}, such a head steps aside to the delay topic when a batch behind it could
 * run. Each topic runs at most its own share of batches at once, within the worker's total.
 *
 * <p>The Streams applications write batches in transactions, so the consumer reads committed
 * records only and a partition's position passes the transaction markers between them. A partition
 * with nothing in hand has its position committed once it passes what was committed, so a marker is
 * not counted as a batch waiting.
 *
 * <p>The consumer is touched only by the worker's loop thread.
 */
final class SinkWorker implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(SinkWorker.class);

  /** How long one commit waits for Kafka before the loop goes on, its offsets still owed. */
  static final Duration COMMIT_WAIT = Duration.ofSeconds(10);

  /** How long after a commit Kafka did not take the loop tries again. */
  static final Duration COMMIT_RETRY = Duration.ofSeconds(5);

  /**
   * How often the batches behind a head held at STOP are looked at again, once none of them could
   * run: each look decodes them.
   */
  private static final Duration LOOK_BEHIND_EVERY = Duration.ofSeconds(1);

  /**
   * How many batches a partition whose head is held at STOP may hold in hand at most, fetching what
   * lies behind its head to see whether one could run.
   */
  static final int FETCH_BEHIND_AT_MOST = 32;

  /** How long the loop waits for Kafka to tell the ends of the partitions it paused. */
  private static final Duration END_OFFSETS_WAIT = Duration.ofMillis(500);

  private static final class PartitionWork {
    final Deque<ConsumerRecord<byte[], byte[]>> pending = new ArrayDeque<>();
    boolean busy;
    volatile boolean revoked;

    /** The table its head batch last ended paused at: it waits while that one is at STOP. */
    Target waitFor;

    /**
     * Runs in a row of its head batch that Kafka would not take back (to requeue, delay or
     * dead-letter it), and when ({@code System.nanoTime()}) the head may run again.
     */
    int refusedInARow;

    long notBefore;

    /**
     * When ({@code System.nanoTime()}) the batches behind a head held at STOP may be looked at
     * again, after a look found none that could run.
     */
    long lookBehindAt = System.nanoTime(); // nanoTime may be negative: 0 is no start of time

    /**
     * Whether the partition, its head held at STOP, fetches what lies behind it (it is not paused),
     * and since when ({@code System.nanoTime()}).
     */
    boolean fetchingBehind;

    long fetchingBehindSince;

    /** Whether the partition is left to fetch, though it holds a batch. */
    boolean fetchesBehind() {
      return fetchingBehind && pending.size() < FETCH_BEHIND_AT_MOST;
    }

    /** Forgotten after a revocation: whatever its batch does now, another worker runs it. */
    volatile boolean forgotten;

    /** Whether a batch of the partition runs or waits here. */
    boolean holding() {
      return busy || !pending.isEmpty();
    }
  }

  private final String name;
  private final Consumer<byte[], byte[]> consumer;
  private final Map<String, Integer> topicLimits;
  private final Map<String, Integer> topicInFlight = new HashMap<>();
  private final BatchHandler handler;
  private final UnitOfWork unit;
  private final HealthGate gate;
  private final SinkSettings settings;
  private final SinkMetrics metrics;
  private final ExecutorService executor;
  private final BlockingQueue<Completed> completions = new LinkedBlockingQueue<>();
  private final Map<TopicPartition, PartitionWork> partitions = new LinkedHashMap<>();
  private final Set<TopicPartition> paused = new HashSet<>();

  /**
   * Each table a head batch waits for at STOP, and since when ({@code System.nanoTime()}) the
   * worker has seen it so; a table seen out of STOP is forgotten.
   */
  private final Map<Target, Long> stoppedSince = new HashMap<>();

  /**
   * The paused partitions' ends as last read, and when ({@code System.nanoTime()}) to read again.
   */
  private Map<TopicPartition, Long> pausedEnds = Map.of();

  private long pausedEndsAt = System.nanoTime();

  /**
   * Per partition held, the offset last committed for it here; -1 until this worker committed one
   * (the first position it can commit is then committed once: the consumer started from it).
   */
  private final Map<TopicPartition, Long> committed = new HashMap<>();

  /**
   * Per partition held, the offset of its settled batches Kafka has not taken yet; dropped when the
   * partition goes, as its next owner runs those batches again.
   */
  private final Map<TopicPartition, OffsetAndMetadata> owed = new HashMap<>();

  /** Whether commits are failing: owed offsets are then tried again at {@link #commitRetryAt}. */
  private boolean commitsFailing;

  /** When owed offsets are tried again ({@code System.nanoTime()}) while commits fail. */
  private long commitRetryAt;

  private final AtomicInteger loops = new AtomicInteger();
  private volatile boolean running = true;
  private volatile boolean stopping;
  private volatile Duration grace;
  private volatile Throwable failure;
  private boolean rebalancing; // what the commits owed wait for: a rebalance, not Kafka
  private boolean drained; // stopping, and the batches in hand have had their grace
  private int leftOwed; // partitions let go while stopping with finished batches not committed
  private int inFlight;
  private Thread thread;

  /** A finished batch, with the partition's work it was started from. */
  private record Completed(
      TopicPartition partition, PartitionWork work, UnitOfWork.Result result) {}

  SinkWorker(
      String name,
      Consumer<byte[], byte[]> consumer,
      List<BatchesTopic> topics,
      BatchHandler handler,
      UnitOfWork unit,
      HealthGate gate,
      SinkSettings settings,
      SinkMetrics metrics) {
    this.name = name;
    this.consumer = consumer;
    this.topicLimits = new HashMap<>();
    topics.forEach(t -> topicLimits.put(t.name(), t.maxInFlight()));
    this.handler = handler;
    this.unit = unit;
    this.gate = gate;
    this.settings = settings;
    this.metrics = metrics;
    this.grace = settings.shutdownGrace();
    // A thread per run, however many: max-in-flight is kept by what is dispatched, and a run let go
    // when its partition moved holds its thread until its next checkpoint, which must not keep a
    // batch dispatched after it from starting.
    this.executor =
        Executors.newCachedThreadPool(
            r -> {
              Thread t = new Thread(r, name + "-batch");
              t.setDaemon(true);
              return t;
            });
  }

  void start() {
    subscribe();
    thread = new Thread(this::loop, name);
    thread.setDaemon(true);
    thread.start();
  }

  /** Joins the consumer group; {@link #start()} does it, tests driving {@link #runOnce()} too. */
  void subscribe() {
    consumer.subscribe(List.copyOf(topicLimits.keySet()), new Rebalance());
  }

  /** Loop iterations so far; tests wait on it instead of sleeping. */
  int loops() {
    return loops.get();
  }

  /** Finished batches not yet settled by the loop; tests wait on it. */
  int completionsWaiting() {
    return completions.size();
  }

  Throwable failure() {
    return failure;
  }

  private void loop() {
    try {
      while (running && failure == null) {
        runOnce();
      }
    } catch (WakeupException e) {
      // close() woke the poll
    } catch (RuntimeException | Error e) {
      // An Error too (out of memory, a class a handler needs missing): the process must hear of
      // it and stop, not go on with a worker that quietly ended.
      failure = e;
      log.error("Sink worker {} stopped: {}", name, e.toString(), e);
    } finally {
      shutdown();
    }
  }

  /** One turn: settle finished batches, start what may start, claim what fits, poll. */
  void runOnce() {
    settle(drain());
    dispatch();
    adjustPauses();
    ConsumerRecords<byte[], byte[]> records = consumer.poll(settings.pollTimeout());
    for (ConsumerRecord<byte[], byte[]> r : records) {
      partitions
          .computeIfAbsent(new TopicPartition(r.topic(), r.partition()), p -> new PartitionWork())
          .pending
          .addLast(r);
    }
    if (!records.isEmpty()) {
      dispatch();
      adjustPauses();
    }
    commitPassed();
    loops.incrementAndGet();
  }

  /**
   * Commits the position of each partition with nothing in hand that passed what was committed:
   * everything before it is settled, so only markers (or records of aborted transactions) lay
   * between. A position not known yet (a partition just assigned) waits for a later turn. A batch
   * settled with nothing after it in hand commits such a position at once. Asynchronous: one that
   * fails is made again at a later turn, and nothing waits on it.
   */
  private void commitPassed() {
    Map<TopicPartition, OffsetAndMetadata> commits = new HashMap<>();
    for (Map.Entry<TopicPartition, Long> e : committed.entrySet()) {
      TopicPartition tp = e.getKey();
      PartitionWork w = partitions.get(tp);
      if ((w != null && w.holding()) || owed.containsKey(tp)) {
        continue; // what it holds, or owes, is committed first
      }
      long position = position(tp);
      if (position > e.getValue()) {
        commits.put(tp, new OffsetAndMetadata(position));
      }
    }
    if (commits.isEmpty()) {
      return;
    }
    commits.forEach((tp, o) -> committed.replace(tp, o.offset()));
    consumer.commitAsync(
        commits,
        (offsets, failure) -> {
          if (failure != null) {
            offsets.keySet().forEach(tp -> committed.replace(tp, -1L));
            log.debug(
                "Sink worker {} will commit past markers again: {}", name, failure.toString());
          }
        });
  }

  /**
   * The partition's position, or -1 while it is not known (its look-up is started, not waited for).
   */
  private long position(TopicPartition tp) {
    try {
      return consumer.position(tp, Duration.ZERO);
    } catch (org.apache.kafka.common.errors.TimeoutException | IllegalStateException unknown) {
      return -1;
    } catch (WakeupException stopping) {
      // The stop's wakeup, meant for the poll, came while a look-up asked Kafka: the turn ends
      // with everything it settled counted and committed, and the loop sees the stop.
      return -1;
    }
  }

  /**
   * Commits {@code offsets}, also when the stop's wakeup, meant for the poll, is still pending: the
   * loop can leave between polls with it unspent, and the first commit while stopping would then
   * throw it, ending the batches' grace.
   */
  static void commitSync(
      Consumer<?, ?> consumer, Map<TopicPartition, OffsetAndMetadata> offsets, Duration wait) {
    try {
      consumer.commitSync(offsets, wait);
    } catch (WakeupException spent) {
      consumer.commitSync(offsets, wait); // throwing it spent the wakeup
    }
  }

  /**
   * Commits the settled batches' offsets, with those Kafka did not take before. While Kafka cannot
   * be reached (or the group is rebalancing) they stay owed and are tried again every {@link
   * #COMMIT_RETRY}, each try waiting {@link #COMMIT_WAIT} at most, so the loop goes on meanwhile:
   * the batches are done, and a worker that stopped for it would only run them again.
   */
  private void commit(Map<TopicPartition, OffsetAndMetadata> commits) {
    commit(commits, false);
  }

  /**
   * @param now whether to try at once, even while Kafka is failing (the partitions are going)
   */
  private void commit(Map<TopicPartition, OffsetAndMetadata> commits, boolean now) {
    owed.putAll(commits);
    owed.keySet().retainAll(committed.keySet()); // only partitions it still holds
    if (owed.isEmpty() || (commitsFailing && !now && System.nanoTime() - commitRetryAt < 0)) {
      return;
    }
    try {
      commitSync(consumer, owed, COMMIT_WAIT);
    } catch (RetriableException | RebalanceInProgressException | CommitFailedException e) {
      boolean first = !commitsFailing;
      commitsFailing = true;
      commitRetryAt = System.nanoTime() + COMMIT_RETRY.toNanos();
      boolean rebalance = e instanceof RebalanceInProgressException;
      // Said once: at INFO for a rebalance (an instance joining or leaving is routine), as a
      // warning when Kafka does not answer, also when that follows a rebalance.
      if (first || (rebalancing && !rebalance)) {
        rebalancing = rebalance;
        if (rebalancing) {
          log.info(
              "Sink worker {} commits the batches it finished on {} partitions once its consumer"
                  + " group has rebalanced (an instance joined or left)",
              name,
              owed.size());
        } else {
          log.warn(
              "Sink worker {} could not commit the batches it finished on {} partitions to Kafka"
                  + " ({}); it commits them once Kafka answers, and goes on meanwhile",
              name,
              owed.size(),
              e.getMessage());
        }
      }
      return;
    }
    owed.forEach((tp, o) -> committed.replace(tp, o.offset()));
    owed.clear();
    if (commitsFailing) {
      commitsFailing = false;
      if (!rebalancing) {
        log.info("Sink worker {} commits to Kafka again", name);
      }
    }
  }

  private List<Completed> drain() {
    List<Completed> done = new ArrayList<>();
    completions.drainTo(done);
    return done;
  }

  private void settle(List<Completed> done) {
    Map<TopicPartition, OffsetAndMetadata> commits = new HashMap<>();
    for (Completed c : done) {
      PartitionWork w = c.work();
      if (partitions.get(c.partition()) != w) {
        // Revoked meanwhile and counted out then; its new owner runs the batch again. When the
        // partition came back to this worker, its work is new: this result is not its head's.
        continue;
      }
      done(c.partition());
      w.busy = false;
      w.waitFor = c.result().commit() ? null : c.result().waitFor();
      if (!c.result().commit() && c.result().outcome() instanceof Outcome.RetryableFailure) {
        // Kafka did not take the batch back (a topic it may not write, a record too large): it
        // runs again, its work redone, only after the retry backoff, doubling while this lasts.
        w.refusedInARow++;
        w.notBefore =
            System.nanoTime()
                + Backoff.doubling(
                        settings.retryBackoff(), w.refusedInARow, settings.retryBackoffMax())
                    .toNanos();
      } else {
        w.refusedInARow = 0;
      }
      if (c.result().commit()) {
        w.pending.pollFirst();
        long next = c.result().record().offset() + 1;
        if (w.pending.isEmpty()) {
          next = Math.max(next, position(c.partition()));
        }
        commits.put(c.partition(), new OffsetAndMetadata(next));
      }
    }
    commit(commits);
  }

  private void dispatch() {
    if (stopping) {
      return;
    }
    stoppedSince.keySet().removeIf(t -> !stopped(t));
    for (Map.Entry<TopicPartition, PartitionWork> e : partitions.entrySet()) {
      if (inFlight >= settings.maxInFlight()) {
        return;
      }
      PartitionWork w = e.getValue();
      if (w.busy || w.pending.isEmpty() || topicFull(e.getKey().topic())) {
        continue;
      }
      if (w.refusedInARow > 0 && System.nanoTime() - w.notBefore < 0) {
        continue;
      }
      TopicPartition tp = e.getKey();
      SinkRecord record = toSinkRecord(w.pending.peekFirst());
      Target stop = heldAt(record, w);
      if (stop != null && !stepsAside(stop, tp, w)) {
        continue; // stays at the head, its partition paused, until health allows
      }
      if (stopping) {
        return; // told to stop during a look-up above, which spent the wakeup meant for the poll
      }
      w.busy = true;
      w.fetchingBehind = false;
      inFlight++;
      topicInFlight.merge(tp.topic(), 1, Integer::sum);
      Supplier<UnitOfWork.Result> work =
          stop == null
              ? () -> unit.run(record, () -> stopping || w.revoked, () -> w.forgotten)
              : () -> unit.stepAside(record, stop, () -> w.forgotten);
      executor.execute(() -> completions.add(new Completed(tp, w, guarded(record, work))));
    }
  }

  /** The table at STOP the head batch waits for, or null when it may run. */
  private Target heldAt(SinkRecord head, PartitionWork w) {
    Target target = target(head);
    if (stopped(target)) {
      return target;
    }
    return stopped(w.waitFor) ? w.waitFor : null;
  }

  /**
   * Whether a head batch held at STOP steps aside: its table has been at STOP for {@code
   * step-aside-after}, and a batch behind it could run (its table is not at STOP), or what lies
   * behind it is not known. A paused partition fetches nothing, so what it holds beyond the batches
   * in hand is fetched first, for a second at most and up to {@link #FETCH_BEHIND_AT_MOST} batches
   * in hand: a transaction's commit marker or an aborted transaction's records, which a position
   * counts but which are no batch, keep nobody waiting. Only batches behind it all for tables at
   * STOP, or none, with nothing unfetched left, keep it where it is; then so does what stays
   * unknown while its whole database is at STOP.
   */
  private boolean stepsAside(Target stop, TopicPartition tp, PartitionWork w) {
    if (settings.stepAsideAfter().isZero()) {
      return false;
    }
    long now = System.nanoTime();
    long since = stoppedSince.computeIfAbsent(stop, t -> now);
    if (now - since < settings.stepAsideAfter().toNanos()
        || (!w.fetchingBehind && now - w.lookBehindAt < 0)) {
      return false;
    }
    if (w.pending.stream().skip(1).anyMatch(r -> !stopped(target(toSinkRecord(r))))) {
      return true;
    }
    if (unfetchedBehind(tp)) {
      if (w.pending.size() < FETCH_BEHIND_AT_MOST) {
        if (!w.fetchingBehind) {
          w.fetchingBehind = true;
          w.fetchingBehindSince = now;
          return false;
        }
        if (now - w.fetchingBehindSince < LOOK_BEHIND_EVERY.toNanos()) {
          return false;
        }
      }
      w.fetchingBehind = false;
      // A database at STOP as a whole stops all its tables: only a batch in hand for another
      // database is worth stepping aside for, not what is unknown behind.
      if (!gate.state(stop.database(), null).isStop()) {
        return true;
      }
    }
    w.fetchingBehind = false;
    w.lookBehindAt = now + LOOK_BEHIND_EVERY.toNanos();
    return false;
  }

  /**
   * Whether the partition holds records behind those in hand (or whether it does is not known):
   * those it held when it paused, or those written to it since.
   */
  private boolean unfetchedBehind(TopicPartition tp) {
    java.util.OptionalLong unfetched = consumer.currentLag(tp);
    if (unfetched.isEmpty() || unfetched.getAsLong() > 0) {
      return true;
    }
    // That lag is the one of the partition's last fetch: it fetches nothing while paused.
    Long end = pausedEnds().get(tp);
    long position = position(tp);
    return end != null && position >= 0 && end > position;
  }

  /**
   * The end offsets of the paused partitions (for reading committed records, where the committed
   * ones end), asked of Kafka at most once per {@link #LOOK_BEHIND_EVERY} for all of them; empty
   * while Kafka does not answer.
   */
  private Map<TopicPartition, Long> pausedEnds() {
    long now = System.nanoTime();
    if (now - pausedEndsAt >= 0) {
      pausedEndsAt = now + LOOK_BEHIND_EVERY.toNanos();
      try {
        pausedEnds = consumer.endOffsets(Set.copyOf(paused), END_OFFSETS_WAIT);
      } catch (org.apache.kafka.common.KafkaException e) {
        // The stop's wakeup, or Kafka not answering in time: nothing more is known than before.
        log.debug("Sink worker {} could not read its paused partitions' ends: {}", name, e);
        pausedEnds = Map.of();
      }
    }
    return pausedEnds;
  }

  /**
   * Runs a batch, or steps it aside. Whatever a batch can fail with is an outcome; what escapes is
   * a defect or the JVM's own trouble (an {@link Error}). Then the batch stays uncommitted and the
   * worker stops saying so, rather than hold its partition, with nothing reported, until the next
   * rebalance.
   */
  private UnitOfWork.Result guarded(SinkRecord record, Supplier<UnitOfWork.Result> work) {
    try {
      return work.get();
    } catch (RuntimeException | Error e) {
      failure = new IllegalStateException("batch " + record.position() + " ended with " + e, e);
      log.error("Sink worker {} stops: batch {} ended with {}", name, record.position(), e, e);
      return new UnitOfWork.Result(record, new Outcome.Paused("ended with " + e), false);
    }
  }

  private boolean topicFull(String topic) {
    return topicInFlight.getOrDefault(topic, 0)
        >= topicLimits.getOrDefault(topic, settings.maxInFlight());
  }

  /** One batch of the partition's topic no longer counts as in flight. */
  private void done(TopicPartition tp) {
    inFlight--;
    topicInFlight.merge(tp.topic(), -1, Integer::sum);
  }

  /** The table the batch works on first; null when it is malformed (its run dead-letters it). */
  private Target target(SinkRecord record) {
    try {
      return handler.target(record).orElse(null);
    } catch (RuntimeException e) {
      return null;
    }
  }

  private boolean stopped(Target t) {
    return t != null && gate.state(t.database(), t.table()).isStop();
  }

  private void adjustPauses() {
    Set<TopicPartition> assigned = consumer.assignment();
    Set<TopicPartition> wanted = new HashSet<>();
    boolean full = inFlight >= settings.maxInFlight();
    for (TopicPartition tp : assigned) {
      PartitionWork w = partitions.get(tp);
      // A partition fetching behind a head held at STOP goes on while the worker is full: what it
      // fetches is bounded, and its look would otherwise run out with nothing fetched.
      boolean fetching = w != null && w.fetchesBehind();
      if (!fetching && (full || (w != null && w.holding()))) {
        wanted.add(tp);
      }
    }
    Set<TopicPartition> toPause = new HashSet<>(wanted);
    toPause.removeAll(paused);
    Set<TopicPartition> toResume = new HashSet<>(paused);
    toResume.removeAll(wanted);
    toResume.retainAll(assigned);
    if (!toPause.isEmpty()) {
      consumer.pause(toPause);
      paused.addAll(toPause);
      metrics.pausedPartitions(toPause.size());
    }
    if (!toResume.isEmpty()) {
      consumer.resume(toResume);
      paused.removeAll(toResume);
      metrics.pausedPartitions(-toResume.size());
    }
    int stale = paused.size();
    paused.retainAll(assigned);
    metrics.pausedPartitions(paused.size() - stale);
  }

  private static SinkRecord toSinkRecord(ConsumerRecord<byte[], byte[]> r) {
    Map<String, byte[]> headers = SinkHeaders.toMap(r.headers());
    return new SinkRecord(
        r.topic(),
        r.partition(),
        r.offset(),
        r.key(),
        r.value(),
        SinkHeaders.attempts(headers),
        headers);
  }

  /**
   * Stops claiming, lets batches in hand end at their next checkpoint (released, not committed),
   * commits what finished, and closes the consumer. With a zero grace nothing in hand is waited
   * for: like a crash, those batches are redelivered to whoever takes their partitions.
   */
  void close(Duration grace) {
    stop(grace);
    awaitStopped();
  }

  /** Tells the worker to stop as {@link #close(Duration)} says, without waiting for it. */
  void stop(Duration grace) {
    this.grace = grace;
    stopping = true;
    running = false;
    consumer.wakeup();
  }

  /** Waits for a worker told to {@link #stop} to have stopped: its grace and 30 s more at most. */
  void awaitStopped() {
    if (thread != null && Thread.currentThread() != thread) {
      try {
        thread.join(grace.toMillis() + 30_000);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }

  @Override
  public void close() {
    close(settings.shutdownGrace());
  }

  private void shutdown() {
    stopping = true;
    try {
      if (!grace.isZero()) {
        settleUntil(() -> inFlight == 0, grace);
        commit(Map.of(), true); // what is still owed, once more
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (RuntimeException e) {
      log.warn("Sink worker {} could not commit while stopping: {}", name, e.getMessage());
    } finally {
      drained = true; // the partitions' revoke as the consumer closes waits no more
      executor.shutdownNow();
      try {
        consumer.close(Duration.ofSeconds(5)); // leaving, it commits what is owed once more
      } finally {
        int uncommitted = leftOwed + owed.size();
        if (uncommitted > 0) {
          log.warn(
              "Sink worker {} stopped with the batches it finished on {} partitions not"
                  + " committed: they run again at the next start",
              name,
              uncommitted);
        }
      }
    }
  }

  /** Settles batches as they finish until {@code done} holds or {@code within} has passed. */
  private void settleUntil(java.util.function.BooleanSupplier done, Duration within)
      throws InterruptedException {
    long deadline = System.nanoTime() + within.toNanos();
    while (!done.getAsBoolean() && System.nanoTime() < deadline) {
      Completed c = completions.poll(50, TimeUnit.MILLISECONDS);
      if (c != null) {
        List<Completed> batch = new ArrayList<>(List.of(c));
        batch.addAll(drain());
        settle(batch);
      }
    }
  }

  /**
   * Revoked partitions: let their batches end (released at the next checkpoint), then forget them.
   */
  private final class Rebalance implements ConsumerRebalanceListener {
    @Override
    public void onPartitionsRevoked(Collection<TopicPartition> revoked) {
      List<PartitionWork> busy = new ArrayList<>();
      for (TopicPartition tp : revoked) {
        PartitionWork w = partitions.get(tp);
        if (w != null) {
          w.revoked = true;
          if (w.busy) {
            busy.add(w);
          }
        }
      }
      try {
        // The configured grace, or a stop's own once one is asked for; none once the stop has
        // had it (a zero one waits for nothing).
        Duration wait = drained ? Duration.ZERO : grace;
        settleUntil(() -> busy.stream().noneMatch(w -> w.busy), wait);
        commit(Map.of(), true); // what they still owe, before they go
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      } finally {
        forget(revoked);
      }
    }

    @Override
    public void onPartitionsAssigned(Collection<TopicPartition> assigned) {
      assigned.forEach(tp -> committed.put(tp, -1L));
    }

    @Override
    public void onPartitionsLost(Collection<TopicPartition> lost) {
      lost.forEach(tp -> Optional.ofNullable(partitions.get(tp)).ifPresent(w -> w.revoked = true));
      forget(lost);
    }

    private void forget(Collection<TopicPartition> gone) {
      for (TopicPartition tp : gone) {
        committed.remove(tp);
        if (owed.remove(tp) != null && stopping) {
          leftOwed++;
        }
        PartitionWork w = partitions.remove(tp);
        if (w != null) {
          w.forgotten = true;
          if (w.busy) {
            done(tp); // its completion, if it comes, is ignored
          }
        }
        if (paused.remove(tp)) {
          metrics.pausedPartitions(-1);
        }
      }
    }
  }
}
