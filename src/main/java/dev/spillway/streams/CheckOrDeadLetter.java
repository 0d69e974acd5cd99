package dev.spillway.streams;

import dev.spillway.sink.SinkHeaders;
import java.util.Objects;
import java.util.function.Function;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;

/**
 * The first node of a pipeline's topology: each record its check accepts goes on to the next node
 * under the key the check names; every other record goes to the dead-letter node with the reason
 * and where it came from, in the headers every dead letter carries. A check that throws counts as a
 * rejection, so one bad record never stops the application.
 */
public final class CheckOrDeadLetter implements Processor<String, byte[], String, byte[]> {
  /**
   * What a check says of one record: pass it on under {@code key}, or reject it as {@code
   * errorClass} because of {@code problem}.
   */
  public record Verdict(String key, String errorClass, String problem) {
    public static Verdict pass(String key) {
      return new Verdict(Objects.requireNonNull(key, "key"), null, null);
    }

    public static Verdict reject(String errorClass, String problem) {
      return new Verdict(null, Objects.requireNonNull(errorClass), String.valueOf(problem));
    }

    boolean passes() {
      return errorClass == null;
    }
  }

  private final Function<Record<String, byte[]>, Verdict> check;
  private final String next;
  private final String deadLetters;
  private final Runnable rejected;
  private ProcessorContext<String, byte[]> context;

  /**
   * @param next the node accepted records go to
   * @param deadLetters the (sink) node rejected records go to
   * @param rejected told of each record sent to the dead letters (a counter, say)
   */
  public CheckOrDeadLetter(
      Function<Record<String, byte[]>, Verdict> check,
      String next,
      String deadLetters,
      Runnable rejected) {
    this.check = check;
    this.next = next;
    this.deadLetters = deadLetters;
    this.rejected = rejected;
  }

  @Override
  public void init(ProcessorContext<String, byte[]> context) {
    this.context = context;
  }

  @Override
  public void process(Record<String, byte[]> record) {
    Verdict v;
    try {
      v = check.apply(record);
    } catch (RuntimeException e) {
      v = Verdict.reject(e.getClass().getName(), e.getMessage());
    }
    if (v.passes()) {
      context.forward(record.withKey(v.key()), next);
      return;
    }
    RecordHeaders h = new RecordHeaders(record.headers().toArray());
    String source =
        context
            .recordMetadata()
            .map(m -> SinkHeaders.position(m.topic(), m.partition(), m.offset()))
            .orElse("unknown");
    // Stamped with the time it failed, not the input's, so a replay's --since finds it by when it
    // was dead-lettered, as it finds the sink's.
    long now = context.currentSystemTimeMs();
    SinkHeaders.addFailure(h, v.errorClass(), v.problem(), source, now);
    context.forward(record.withHeaders(h).withTimestamp(now), deadLetters);
    rejected.run();
  }
}
