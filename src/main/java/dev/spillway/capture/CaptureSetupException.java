package dev.spillway.capture;

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
}
