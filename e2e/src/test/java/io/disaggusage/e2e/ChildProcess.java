package io.disaggusage.e2e;

import java.time.Duration;

/**
 * A program a test starts, and may kill, freeze and thaw, and start again: the faults a fault test
 * injects. Closing thaws it first (a frozen process cannot act on SIGTERM), then stops it.
 */
abstract class ChildProcess implements AutoCloseable {
  private final Duration grace;
  Process process;

  ChildProcess(Duration grace) {
    this.grace = grace;
  }

  void kill() {
    Processes.kill(process);
  }

  void freeze() {
    Processes.signal(process, "STOP");
  }

  void thaw() {
    Processes.signal(process, "CONT");
  }

  @Override
  public void close() {
    if (process != null && process.isAlive()) {
      thaw();
    }
    Processes.stop(process, grace);
  }
}
