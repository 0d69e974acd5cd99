package dev.spillway.buffers;

import java.util.List;

/**
 * A batch's handler gave up (rejected, or failed {@code max-attempts} times) with rows left. Its
 * message is what the dead-letter topic's {@code spillway.error.message} header says.
 */
public final class BufferExhaustedException extends Exception {
  private static final long serialVersionUID = 1L;

  private final transient List<Object> ids;

  /**
   * @param rejected the handler rejected the batch on attempt {@code attempts}, rather than failing
   *     it every time it was allowed
   */
  BufferExhaustedException(
      String buffer,
      String groupId,
      int attempts,
      boolean rejected,
      List<Object> ids,
      String reason) {
    super(
        "Buffer "
            + buffer
            + " batch "
            + groupId
            + ": "
            + ids.size()
            + (rejected
                ? " event(s) rejected by its handler on attempt " + attempts
                : " event(s) left after " + attempts + " attempt(s)")
            + ": "
            + reason);
    this.ids = List.copyOf(ids);
  }

  /** The ids of the rows that were not handled. */
  public List<Object> ids() {
    return ids;
  }
}
