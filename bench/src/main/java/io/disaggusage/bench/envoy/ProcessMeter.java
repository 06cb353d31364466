package io.disaggusage.bench.envoy;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * CPU time and resident memory of a process, read from Linux's {@code /proc/<pid>/stat} (user + system
 * time of all its threads, in clock ticks) and {@code /proc/<pid>/status} ({@code VmRSS}), so any child
 * (Envoy, a JVM) is measured the same way and from outside.
 */
final class ProcessMeter {
  /** Clock ticks per second of {@code /proc/<pid>/stat}: {@code getconf CLK_TCK}, 100 on every common Linux. */
  private static final long TICKS_PER_SECOND = clockTicks();

  private ProcessMeter() {}

  /** User plus system CPU time the process has used so far, in nanoseconds (tick resolution). */
  static long cpuNanos(long pid) {
    String stat = read(Path.of("/proc", Long.toString(pid), "stat"));
    // the command name (field 2) may hold spaces and parentheses: count fields after its closing one
    String[] fields = stat.substring(stat.lastIndexOf(')') + 2).trim().split(" ");
    long ticks = Long.parseLong(fields[11]) + Long.parseLong(fields[12]); // utime, stime (fields 14, 15)
    return ticks * 1_000_000_000L / TICKS_PER_SECOND;
  }

  /** The process's resident set size in bytes. */
  static long rssBytes(long pid) {
    for (String line : read(Path.of("/proc", Long.toString(pid), "status")).split("\n")) {
      if (line.startsWith("VmRSS:")) {
        return Long.parseLong(line.substring(6).trim().split("\\s+")[0]) * 1024;
      }
    }
    throw new IllegalStateException("no VmRSS for process " + pid);
  }

  private static String read(Path file) {
    try {
      return Files.readString(file, StandardCharsets.US_ASCII);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read " + file + " (Linux only; is the process alive?)", e);
    }
  }

  private static long clockTicks() {
    try {
      Process p = new ProcessBuilder("getconf", "CLK_TCK").redirectErrorStream(true).start();
      String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.US_ASCII).trim();
      return p.waitFor() == 0 ? Long.parseLong(out) : 100;
    } catch (IOException | RuntimeException e) {
      return 100;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return 100;
    }
  }
}
