package io.disaggusage.bench.envoy;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

/**
 * A process the benchmark starts and measures: its pid for {@link ProcessMeter}, its log for a failure's
 * message, a shutdown hook so it never outlives the benchmark, and the admin-port polling every child's
 * readiness needs.
 */
class ChildProcess implements AutoCloseable {
  private static final HttpClient ADMIN =
      HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(Duration.ofSeconds(1)).build();

  final String name;
  final Path log;
  private final Process process;
  private final Thread exitHook;

  /** Starts {@code command}; stdout goes to {@code stdout} (null: discarded), stderr to {@code log}. */
  ChildProcess(String name, List<String> command, Path stdout, Path log) {
    this.name = name;
    this.log = log;
    try {
      process = new ProcessBuilder(command)
          .redirectOutput(stdout == null ? ProcessBuilder.Redirect.DISCARD : ProcessBuilder.Redirect.appendTo(stdout.toFile()))
          .redirectError(ProcessBuilder.Redirect.appendTo(log.toFile()))
          .start();
    } catch (IOException e) {
      throw new UncheckedIOException("cannot start " + name + " (" + command.get(0) + ")", e);
    }
    exitHook = new Thread(process::destroyForcibly, "bench-stop-" + name);
    Runtime.getRuntime().addShutdownHook(exitHook);
  }

  long pid() {
    return process.pid();
  }

  /** Polls {@code ready} every 20 ms; fails with the end of the log if the process exits or time runs out. */
  void await(String what, Duration timeout, BooleanSupplier ready) {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (!ready.getAsBoolean()) {
      if (!process.isAlive()) {
        throw new IllegalStateException(name + " exited with " + process.exitValue() + " before " + what + "; " + logEnd());
      }
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException(name + ": no " + what + " after " + timeout.toSeconds() + " s; " + logEnd());
      }
      try {
        Thread.sleep(20);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException(e);
      }
    }
  }

  /** The body of a GET to a loopback admin port, or null when it does not answer 200. */
  static String get(int port, String path) {
    try {
      HttpResponse<String> r = ADMIN.send(
          HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path)).timeout(Duration.ofSeconds(2)).build(),
          HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
      return r.statusCode() == 200 ? r.body() : null;
    } catch (IOException e) {
      return null;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  String logEnd() {
    try {
      List<String> lines = Files.readAllLines(log, StandardCharsets.UTF_8);
      return "its log " + log + " ends:\n" + String.join("\n", lines.subList(Math.max(0, lines.size() - 20), lines.size()));
    } catch (IOException e) {
      return "no log at " + log;
    }
  }

  @Override
  public void close() {
    try {
      Runtime.getRuntime().removeShutdownHook(exitHook);
    } catch (IllegalStateException e) {
      // the JVM is exiting: the hook stops the process
    }
    process.destroy();
    try {
      if (!process.waitFor(5, TimeUnit.SECONDS)) {
        process.destroyForcibly().waitFor(5, TimeUnit.SECONDS);
      }
    } catch (InterruptedException e) {
      process.destroyForcibly();
      Thread.currentThread().interrupt();
    }
  }
}
