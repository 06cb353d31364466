package io.disaggusage.extproc.testkit;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.stream.Stream;

/**
 * A program a test or a benchmark starts: its command with its output appended to a log, its pid (for
 * {@code ProcessMeter}), its readiness awaited with the end of that log in the failure's message, and the
 * faults a fault test injects (kill, freeze, thaw). It can be launched again after it ended, on the same
 * log. Closing thaws it first (a frozen process cannot act on SIGTERM), then stops it and every process it
 * started. A shutdown hook kills whatever is still running when the JVM exits (a test that failed before
 * closing it), so no child outlives its JVM (short of a SIGKILL to the JVM).
 */
public class ChildProcess implements AutoCloseable {
  /** How often {@link #await} asks: often enough for a quick start, seldom enough not to slow a starting JVM down. */
  private static final Duration POLL = Duration.ofMillis(20);
  private static final int LOG_END_LINES = 30;
  private static final Set<Process> LIVE = ConcurrentHashMap.newKeySet();

  static {
    Runtime.getRuntime().addShutdownHook(new Thread(() -> LIVE.forEach(ChildProcess::killTree), "child-processes-stop"));
  }

  private final String name;
  private final Path log;
  private final Duration grace;
  private volatile Process process;

  /**
   * Not started yet. {@code log}: where its stderr (and, unless {@link #launch} says otherwise, its stdout)
   * is appended; {@code grace}: how long {@link #close()} waits after SIGTERM before SIGKILL.
   */
  public ChildProcess(String name, Path log, Duration grace) {
    this.name = Objects.requireNonNull(name, "name");
    this.log = Objects.requireNonNull(log, "log"); // every failure's message shows its end
    this.grace = Objects.requireNonNull(grace, "grace");
  }

  /** Starts {@code command}, stdout and stderr appended to the log. */
  public final void launch(List<String> command) {
    launch(command, Map.of(), log);
  }

  /** Starts {@code command} with {@code environment} added to this JVM's, stdout and stderr appended to the log. */
  public final void launch(List<String> command, Map<String, String> environment) {
    launch(command, environment, log);
  }

  /**
   * Starts {@code command} with {@code environment} added to this JVM's, its stdout appended to {@code stdout}
   * (null: discarded) and its stderr to the log.
   *
   * @throws IllegalStateException when it is running already
   */
  public final void launch(List<String> command, Map<String, String> environment, Path stdout) {
    if (isAlive()) {
      throw new IllegalStateException(name + " is running");
    }
    ProcessBuilder builder = new ProcessBuilder(command)
        .redirectOutput(stdout == null ? ProcessBuilder.Redirect.DISCARD : ProcessBuilder.Redirect.appendTo(stdout.toFile()))
        .redirectError(ProcessBuilder.Redirect.appendTo(log.toFile()));
    builder.environment().putAll(environment);
    try {
      Process started = builder.start();
      LIVE.add(started);
      started.onExit().thenRun(() -> LIVE.remove(started));
      process = started;
    } catch (IOException e) {
      throw new UncheckedIOException("cannot start " + name + " (" + command.get(0) + ")", e);
    }
  }

  /** Where its stderr goes. */
  public final Path log() {
    return log;
  }

  /** The process as last launched (null before): for what this class does not cover, e.g. its descendants. */
  public final Process process() {
    return process;
  }

  /** Its pid, for {@code ProcessMeter} and for telling a restarted process from the one before. */
  public final long pid() {
    return started().pid();
  }

  public final boolean isAlive() {
    Process current = process;
    return current != null && current.isAlive();
  }

  /** Its name, as failure messages give it. */
  @Override
  public String toString() {
    return name;
  }

  /**
   * Polls {@code ready} until it holds.
   *
   * @throws IllegalStateException when the process exits first or {@code timeout} runs out; the message
   *     carries the end of its log
   */
  public final void await(String what, Duration timeout, BooleanSupplier ready) {
    Process current = started();
    long deadline = System.nanoTime() + timeout.toNanos();
    while (!ready.getAsBoolean()) {
      if (!current.isAlive()) {
        throw new IllegalStateException(name + " exited with " + current.exitValue() + " before " + what + "; " + logEnd());
      }
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException(name + ": no " + what + " after " + timeout.toMillis() + " ms; " + logEnd());
      }
      sleep(POLL);
    }
  }

  /**
   * Waits until the process ends by itself and returns its exit status.
   *
   * @throws IllegalStateException when it is still running after {@code timeout} (it is killed then)
   */
  public final int awaitExit(Duration timeout) {
    Process current = started();
    try {
      if (!current.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
        kill();
        throw new IllegalStateException(name + " did not finish in " + timeout.toSeconds() + " s; " + logEnd());
      }
      return current.exitValue();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  /**
   * The last lines of the log, introduced by its path: what a failure's message shows. Read as a stream
   * that keeps only those lines, as a debug-level log can run to many megabytes.
   */
  public final String logEnd() {
    Deque<String> end = new ArrayDeque<>(LOG_END_LINES);
    try (Stream<String> lines = Files.lines(log, StandardCharsets.UTF_8)) {
      lines.forEachOrdered(line -> {
        if (end.size() == LOG_END_LINES) {
          end.removeFirst();
        }
        end.addLast(line);
      });
    } catch (IOException | UncheckedIOException e) {
      return "its log " + log + " is unreadable: " + e.getMessage();
    }
    return "its log " + log + " ends:\n" + String.join("\n", end);
  }

  /** SIGKILL to it and to every process it started, and waits until it is gone: a crash. */
  public final void kill() {
    Process current = started();
    killTree(current);
    try {
      current.waitFor();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** SIGSTOP: it holds its sockets open and answers nothing, as a hung process does. */
  public final void freeze() {
    signal("STOP");
  }

  /** SIGCONT after {@link #freeze()}. */
  public final void thaw() {
    signal("CONT");
  }

  /**
   * SIGTERM to the process and to every process it started, then SIGKILL to those still alive after the
   * grace. The descendants are signalled too because a launcher's child can outlive it: the image's
   * entrypoint runs under {@code unshare --setuid}, and a change of user clears the parent-death signal
   * that would otherwise stop it with unshare.
   */
  @Override
  public void close() {
    Process current = process;
    if (current == null || !current.isAlive()) {
      return;
    }
    try {
      thaw();
    } catch (IllegalStateException exited) {
      // it ended meanwhile: nothing to thaw
    }
    List<ProcessHandle> descendants = current.descendants().toList();
    current.destroy();
    descendants.forEach(ProcessHandle::destroy);
    try {
      if (!current.waitFor(grace.toMillis(), TimeUnit.MILLISECONDS)) {
        current.destroyForcibly().waitFor(5, TimeUnit.SECONDS);
      }
      long deadline = System.nanoTime() + grace.toNanos();
      for (ProcessHandle descendant : descendants) {
        while (descendant.isAlive() && System.nanoTime() < deadline) {
          sleep(POLL);
        }
        descendant.destroyForcibly();
      }
    } catch (InterruptedException e) {
      killTree(current);
      Thread.currentThread().interrupt();
    }
  }

  private Process started() {
    Process current = process;
    if (current == null) {
      throw new IllegalStateException(name + " was never started");
    }
    return current;
  }

  /** Sends a signal by name (STOP, CONT) with {@code kill}: Java can send only TERM and KILL. */
  private void signal(String signal) {
    long pid = pid();
    try {
      Process kill = new ProcessBuilder("kill", "-" + signal, Long.toString(pid)).inheritIO().start();
      if (!kill.waitFor(5, TimeUnit.SECONDS) || kill.exitValue() != 0) {
        throw new IllegalStateException("kill -" + signal + " " + pid + " (" + name + ") failed");
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  private static void killTree(Process process) {
    process.descendants().forEach(ProcessHandle::destroyForcibly);
    process.destroyForcibly();
  }

  private static void sleep(Duration duration) {
    try {
      Thread.sleep(duration.toMillis());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }
}
