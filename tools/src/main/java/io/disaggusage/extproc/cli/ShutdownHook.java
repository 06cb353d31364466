package io.disaggusage.extproc.cli;

/**
 * A JVM shutdown hook a long-running command installs for its resources, and removes once it has
 * closed them itself; it runs only when the JVM exits without the command's own shutdown path.
 */
public final class ShutdownHook {
  private final Thread thread;

  private ShutdownHook(Thread thread) {
    this.thread = thread;
  }

  /** Registers {@code action} to run, on a thread named {@code threadName}, when the JVM shuts down. */
  public static ShutdownHook install(Runnable action, String threadName) {
    Thread thread = new Thread(action, threadName);
    Runtime.getRuntime().addShutdownHook(thread);
    return new ShutdownHook(thread);
  }

  /** Unregisters the hook; when the JVM is already exiting (the hook has run or is running), does nothing. */
  public void remove() {
    try {
      Runtime.getRuntime().removeShutdownHook(thread);
    } catch (IllegalStateException e) {
      // the JVM is already exiting; the hook has run or is running
    }
  }
}
