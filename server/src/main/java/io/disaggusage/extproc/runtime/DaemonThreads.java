package io.disaggusage.extproc.runtime;

import java.util.concurrent.ThreadFactory;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Thread factories for the service's own pools: daemon threads, so that none of them keeps the JVM up
 * once the runtime has stopped, and named, so that a thread dump says whose they are.
 */
final class DaemonThreads {
  private DaemonThreads() {}

  /** Every thread named {@code name}: for a pool of one. */
  static ThreadFactory named(String name) {
    return runnable -> daemon(runnable, name);
  }

  /** Threads named {@code prefix} and a count from 1. */
  static ThreadFactory numbered(String prefix) {
    AtomicInteger next = new AtomicInteger(1);
    return runnable -> daemon(runnable, prefix + next.getAndIncrement());
  }

  private static Thread daemon(Runnable runnable, String name) {
    Thread thread = new Thread(runnable, name);
    thread.setDaemon(true);
    return thread;
  }
}
