package dev.spillway.sink;

import dev.spillway.event.TableName;
import java.nio.charset.StandardCharsets;
import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * A batch handler for sink tests: a batch is {@code schema.table:id,id,...} and deletes those rows
 * in sub-batches, first skipping locked rows, then waiting for them — the shape real pipelines use.
 */
class DeleteIdsHandler implements BatchHandler {
  final String database;
  final int subBatch;
  final List<Integer> sizes = new CopyOnWriteArrayList<>();

  DeleteIdsHandler(String database, int subBatch) {
    this.database = database;
    this.subBatch = subBatch;
  }

  static byte[] batch(TableName table, long fromId, long toId) {
    StringBuilder b = new StringBuilder(table.toString()).append(':');
    for (long id = fromId; id <= toId; id++) {
      b.append(id).append(id < toId ? "," : "");
    }
    return b.toString().getBytes(StandardCharsets.UTF_8);
  }

  @Override
  public Optional<Target> target(SinkRecord record) {
    String v = new String(record.value(), StandardCharsets.UTF_8);
    int colon = v.indexOf(':');
    if (colon < 0 || !v.contains(".")) {
      return Optional.empty();
    }
    return Optional.of(new Target(database, TableName.parse(v.substring(0, colon))));
  }

  /** Called after each committed sub-batch; tests override it to interfere mid-run. */
  void afterSubBatch(RunContext context) throws InterruptedException {}

  @Override
  public Outcome execute(SinkRecord record, RunContext context) throws Exception {
    String v = new String(record.value(), StandardCharsets.UTF_8);
    String[] parts = v.substring(v.indexOf(':') + 1).split(",");
    Long[] ids = new Long[parts.length];
    for (int i = 0; i < parts.length; i++) {
      ids[i] = Long.parseLong(parts[i]);
    }
    String t = context.target().table().quoted();
    for (boolean skipLocked : new boolean[] {true, false}) {
      String sql =
          "DELETE FROM "
              + t
              + " WHERE id IN (SELECT id FROM "
              + t
              + " WHERE id = ANY(?) LIMIT ?"
              + (skipLocked ? " FOR UPDATE SKIP LOCKED)" : " FOR UPDATE)");
      while (true) {
        Optional<Outcome> end = context.checkpoint();
        if (end.isPresent()) {
          return end.get();
        }
        int size = context.subBatchSize(subBatch);
        sizes.add(size);
        long start = System.nanoTime();
        int deleted;
        try (Connection c = context.dataSource().getConnection();
            PreparedStatement ps = c.prepareStatement(sql)) {
          Array array = c.createArrayOf("bigint", ids);
          ps.setArray(1, array);
          ps.setInt(2, size);
          deleted = ps.executeUpdate();
        }
        context.subBatchDone(deleted, System.nanoTime() - start);
        afterSubBatch(context);
        if (deleted < size) {
          break;
        }
      }
    }
    return new Outcome.Done(context.rows());
  }
}
