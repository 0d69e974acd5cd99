package dev.spillway.lfk;

import dev.spillway.event.DeletedRecord;
import dev.spillway.event.EventSerdes;
import dev.spillway.event.TableName;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.function.Function;
import javax.sql.DataSource;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;

/**
 * Finds parent rows deleted without their children being cleaned up: child rows, still to be
 * cleaned, that refer to a parent row which no longer exists, such as deletes made while capture
 * could not read them (its replication slot lost or dropped). Each loose foreign key's child column
 * is read a chunk of distinct values at a time, in order, through its index, and the parent is
 * asked which of them it lacks; an id counts as deleted only when the parent still lacks it at a
 * second look, {@code recheckAfter} later, so a parent whose transaction had not committed yet is
 * not taken for a deleted one. Found ids are handed to the cleanup as deleted records, on the topic
 * capture writes, so the pipeline cleans them like any captured delete: in batches, behind the
 * health gates, idempotently.
 */
public final class OrphanSweep {
  /** A parent table, in the database holding it, with the key column deleted records carry. */
  public record Parent(String database, TableName table, String keyColumn) {}

  /**
   * What the sweep found for one loose foreign key.
   *
   * @param valuesChecked distinct values of the child column read, among rows still to be cleaned
   * @param missing how many of them refer to a parent row that is gone
   */
  public record Finding(CheckedKey key, long valuesChecked, long missing) {}

  /**
   * Everything the sweep found.
   *
   * @param deleted per parent table, the ids of its rows that are gone while children refer to
   *     them, as the text of the parent's key type
   */
  public record Result(List<Finding> findings, Map<Parent, List<String>> deleted) {
    public Result {
      findings = List.copyOf(findings);
      Map<Parent, List<String>> copy = new LinkedHashMap<>();
      deleted.forEach((p, ids) -> copy.put(p, List.copyOf(ids)));
      deleted = java.util.Collections.unmodifiableMap(copy);
    }

    public long deletedCount() {
      return deleted.values().stream().mapToLong(List::size).sum();
    }
  }

  /** How the sweep waits before its second look; tests use it to act in between. */
  @FunctionalInterface
  public interface Pause {
    void pause(Duration d) throws InterruptedException;
  }

  /** Deleted records a hand-over sent, and how many of them Kafka refused. */
  public record HandOver(long sent, long failed, String firstError) {}

  /**
   * Ids in the order of their keys, as far as text tells: numbers by value, the rest (ISO dates and
   * times, uuids) by their text.
   */
  static final Comparator<String> IN_KEY_ORDER =
      (a, b) -> {
        BigDecimal x = number(a);
        BigDecimal y = number(b);
        return x != null && y != null ? x.compareTo(y) : a.compareTo(b);
      };

  private OrphanSweep() {}

  private static BigDecimal number(String text) {
    try {
      return new BigDecimal(text);
    } catch (NumberFormatException e) {
      return null;
    }
  }

  /**
   * Sweeps the loose foreign keys.
   *
   * @param dataSources Spillway database name → its pool
   * @param chunk distinct child values read, and parent ids asked for, per statement
   * @param recheckAfter how long after its first look the sweep looks again at the ids it found
   *     missing
   */
  public static Result find(
      List<CheckedKey> keys,
      Function<String, DataSource> dataSources,
      int chunk,
      Duration recheckAfter,
      Pause pause)
      throws SQLException, InterruptedException {
    if (chunk < 1) {
      throw new IllegalArgumentException("chunk must be at least 1: " + chunk);
    }
    Map<Parent, CleanupStatements> parents = new LinkedHashMap<>();
    Map<Parent, Set<String>> candidates = new LinkedHashMap<>();
    List<Set<String>> perKey = new ArrayList<>();
    List<Long> checked = new ArrayList<>();
    for (CheckedKey k : keys) {
      CleanupStatements sql = new CleanupStatements(k);
      Parent parent = parent(k);
      parents.putIfAbsent(parent, sql);
      Set<String> mine = new LinkedHashSet<>();
      DataSource childDs = dataSources.apply(k.childDatabase());
      DataSource parentDs = dataSources.apply(k.parentDatabase());
      long values = 0;
      String after = null;
      while (true) {
        List<String> references = references(childDs, sql, after, chunk);
        if (references.isEmpty()) {
          break;
        }
        values += references.size();
        mine.addAll(missing(parentDs, sql, references));
        after = references.get(references.size() - 1);
        if (references.size() < chunk) {
          break;
        }
      }
      candidates.computeIfAbsent(parent, p -> new LinkedHashSet<>()).addAll(mine);
      perKey.add(mine);
      checked.add(values);
    }
    if (candidates.values().stream().anyMatch(s -> !s.isEmpty())) {
      pause.pause(recheckAfter);
    }
    Map<Parent, List<String>> deleted = new LinkedHashMap<>();
    for (Map.Entry<Parent, Set<String>> e : candidates.entrySet()) {
      if (e.getValue().isEmpty()) {
        continue;
      }
      DataSource parentDs = dataSources.apply(e.getKey().database());
      List<String> ids = new ArrayList<>(e.getValue());
      List<String> still = new ArrayList<>();
      for (int from = 0; from < ids.size(); from += chunk) {
        still.addAll(
            missing(
                parentDs,
                parents.get(e.getKey()),
                ids.subList(from, Math.min(ids.size(), from + chunk))));
      }
      if (!still.isEmpty()) {
        still.sort(IN_KEY_ORDER);
        deleted.put(e.getKey(), still);
      }
    }
    List<Finding> findings = new ArrayList<>();
    for (int i = 0; i < keys.size(); i++) {
      Set<String> confirmed =
          new LinkedHashSet<>(deleted.getOrDefault(parent(keys.get(i)), List.of()));
      long missing = perKey.get(i).stream().filter(confirmed::contains).count();
      findings.add(new Finding(keys.get(i), checked.get(i), missing));
    }
    return new Result(findings, deleted);
  }

  /**
   * Sends a deleted record for every id found, keyed by parent table as capture keys them, and
   * waits until Kafka has taken or refused each.
   */
  public static HandOver handOver(
      Result result, Producer<byte[], byte[]> producer, String topic, Clock clock)
      throws InterruptedException {
    long nowMillis = clock.millis();
    List<Future<RecordMetadata>> sends = new ArrayList<>();
    for (Map.Entry<Parent, List<String>> e : result.deleted().entrySet()) {
      Parent p = e.getKey();
      byte[] key = p.table().toString().getBytes(StandardCharsets.UTF_8);
      for (String id : e.getValue()) {
        byte[] value =
            EventSerdes.encode(
                new DeletedRecord(
                    p.database(),
                    p.table(),
                    Map.of(p.keyColumn(), id),
                    nowMillis * 1000,
                    0,
                    nowMillis));
        sends.add(producer.send(new ProducerRecord<>(topic, key, value)));
      }
    }
    producer.flush();
    long failed = 0;
    String firstError = null;
    for (Future<RecordMetadata> send : sends) {
      try {
        send.get();
      } catch (ExecutionException e) {
        failed++;
        if (firstError == null) {
          firstError = String.valueOf(e.getCause().getMessage());
        }
      }
    }
    return new HandOver(sends.size() - failed, failed, firstError);
  }

  private static Parent parent(CheckedKey k) {
    return new Parent(k.parentDatabase(), k.key().parent(), k.parentPrimaryKey());
  }

  private static List<String> references(
      DataSource ds, CleanupStatements sql, String after, int chunk) throws SQLException {
    try (Connection c = ds.getConnection();
        PreparedStatement ps = c.prepareStatement(sql.references(after))) {
      sql.bindReferences(ps, after, chunk);
      return strings(ps);
    }
  }

  private static List<String> missing(DataSource ds, CleanupStatements sql, List<String> ids)
      throws SQLException {
    try (Connection c = ds.getConnection();
        PreparedStatement ps = c.prepareStatement(sql.missingParents())) {
      ps.setArray(1, c.createArrayOf("text", ids.toArray()));
      return strings(ps);
    }
  }

  private static List<String> strings(PreparedStatement ps) throws SQLException {
    List<String> out = new ArrayList<>();
    try (ResultSet rs = ps.executeQuery()) {
      while (rs.next()) {
        out.add(rs.getString(1));
      }
    }
    return out;
  }
}
