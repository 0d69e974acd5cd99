package dev.spillway.capture;

/**
 * Capture's replication slot cannot stream to this process: another one streams from it, or the
 * server has invalidated it. Not a configuration error (the same configuration works once the slot
 * is free or made anew); the message is one sentence saying what to do.
 */
public final class SlotUnavailableException extends RuntimeException {
  public SlotUnavailableException(String message) {
    super(message);
  }
}
