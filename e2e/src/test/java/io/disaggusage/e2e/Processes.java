package io.disaggusage.e2e;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

/** Starting, signalling and awaiting the child processes of a test. */
final class Processes {
  /** Children still running when the test JVM exits (a test that failed before closing them) are killed. */
  private static final java.util.Set<Process> LIVE = java.util.concurrent.ConcurrentHashMap.newKeySet();

  static {
    Runtime.getRuntime().addShutdownHook(new Thread(() -> LIVE.forEach(Process::destroyForcibly)));
  }

  private Processes() {}

  /** Starts {@code command} with stdout and stderr appended to {@code stdout} and {@code stderr}. */
  static Process start(List<String> command, Path stdout, Path stderr) {
    return start(command, java.util.Map.of(), stdout, stderr);
  }

  /** {@link #start(List, Path, Path)} with {@code environment} added to the test's own. */
  static Process start(List<String> command, java.util.Map<String, String> environment, Path stdout, Path stderr) {
    try {
      ProcessBuilder builder = new ProcessBuilder(command);
      builder.environment().putAll(environment);
      Process process = builder
          .redirectOutput(ProcessBuilder.Redirect.appendTo(stdout.toFile()))
          .redirectError(ProcessBuilder.Redirect.appendTo(stderr.toFile()))
          .start();
      LIVE.add(process);
      process.onExit().thenRun(() -> LIVE.remove(process));
      return process;
    } catch (IOException e) {
      throw new UncheckedIOException("cannot start " + command.get(0), e);
    }
  }

  /** Sends a signal by name (STOP, CONT, KILL, TERM) to a process. */
  static void signal(Process process, String signal) {
    try {
      Process kill = new ProcessBuilder("kill", "-" + signal, Long.toString(process.pid())).inheritIO().start();
      if (!kill.waitFor(5, TimeUnit.SECONDS) || kill.exitValue() != 0) {
        throw new IllegalStateException("kill -" + signal + " " + process.pid() + " failed");
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  /** SIGKILL, and waits until the process is gone. */
  static void kill(Process process) {
    process.descendants().forEach(ProcessHandle::destroyForcibly); // see stop: a launcher's child can outlive it
    signal(process, "KILL");
    try {
      process.waitFor();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** Ends a process: SIGTERM, then SIGKILL after {@code grace}. */
  /**
   * SIGTERM to the process and to every process it started, then SIGKILL to those still alive after
   * {@code grace}. The descendants are signalled too because a launcher's child can outlive it: the
   * image's entrypoint runs under {@code unshare --setuid}, and a change of user clears the
   * parent-death signal that would otherwise stop it with unshare.
   */
  static void stop(Process process, Duration grace) {
    if (process == null || !process.isAlive()) {
      return;
    }
    java.util.List<ProcessHandle> descendants = process.descendants().toList();
    process.destroy();
    descendants.forEach(ProcessHandle::destroy);
    try {
      if (!process.waitFor(grace.toMillis(), TimeUnit.MILLISECONDS)) {
        process.destroyForcibly().waitFor(5, TimeUnit.SECONDS);
      }
      long deadline = System.nanoTime() + grace.toNanos();
      for (ProcessHandle descendant : descendants) {
        while (descendant.isAlive() && System.nanoTime() < deadline) {
          Thread.sleep(20);
        }
        descendant.destroyForcibly();
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** Polls {@code condition} every 10 ms until it holds; fails with {@code what} after {@code timeout}. */
  static void await(String what, Duration timeout, BooleanSupplier condition) {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("timed out after " + timeout.toMillis() + " ms waiting for " + what);
      }
      sleepMillis(10);
    }
  }

  /** Polls like {@link #await} and returns how long the condition took to hold. */
  static Duration time(String what, Duration timeout, BooleanSupplier condition) {
    long start = System.nanoTime();
    await(what, timeout, condition);
    return Duration.ofNanos(System.nanoTime() - start);
  }

  static void sleepMillis(long millis) {
    try {
      Thread.sleep(millis);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }
}
