package dev.spillway.capture;

/**
 * Another process streams from capture's replication slot (another instance of the same
 * installation): this one stands by until the slot is let go.
 */
final class SlotBusyException extends RuntimeException {
  SlotBusyException(String message) {
    super(message);
  }
}
