package dev.spillway.capture;

import dev.spillway.sink.Outcome;
import dev.spillway.sink.SqlErrors;

/**
 * A source database is not ready for change capture. The message is one sentence saying what is
 * wrong and how to fix it; nothing has been changed in the database when this is thrown.
 */
public final class CaptureSetupException extends RuntimeException {
  public CaptureSetupException(String message) {
    super(message);
  }

  public CaptureSetupException(String message, Throwable cause) {
    super(message, cause);
  }

  /**
   * A failure met while checking, preparing or starting capture: the database's refusal of a
   * statement (a permission, an object missing) is the database not being ready, a {@code
   * CaptureSetupException}; the database or Kafka away or busy (a connection lost or refused, the
   * server shutting down, no connection free, a timeout) is not, and fails as any runtime failure
   * does, so that a service manager restarts the process rather than takes it for a configuration
   * to mend.
   */
  static RuntimeException of(String message, Throwable cause) {
    boolean refused =
        SqlErrors.fromDatabase(cause)
            && SqlErrors.classify(cause) instanceof Outcome.PermanentFailure;
    return refused
        ? new CaptureSetupException(message, cause)
        : new IllegalStateException(message, cause);
  }
}
