package dev.spillway.support;

/** Shutdown hooks taken away once what they guard has ended. */
public final class ShutdownHooks {
  private ShutdownHooks() {}

  /**
   * Takes {@code hook} away, unless it is the thread calling (the hook itself ending what it
   * guards) or the JVM is already shutting down, when the hook runs and finds its work done.
   */
  public static void remove(Thread hook) {
    if (Thread.currentThread() == hook) {
      return;
    }
    try {
      Runtime.getRuntime().removeShutdownHook(hook);
    } catch (IllegalStateException e) {
      // The JVM is shutting down: the hook runs, and finds nothing left to do.
    }
  }
}
