package io.disaggusage.bench.envoy;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * How much a child JVM's JIT compiled and its collector collected so far, read from outside with {@code jcmd
 * <pid> PerfCounter.print} (the JVM's own counters: {@code sun.ci.totalCompiles}, {@code java.ci.totalTime},
 * each collector's {@code invocations} and {@code time}, in ticks of {@code sun.os.hrt.frequency}). Two
 * readings around a measurement tell whether the JIT was still at work while it ran: a compile runs on a
 * thread of its own, but on two cores it takes a core from the request being measured.
 */
record JvmActivity(long compiles, long compileNanos, long collections, long collectionNanos) {

  /** The counters of the JVM with process id {@code pid} now. */
  static JvmActivity read(long pid) throws IOException, InterruptedException {
    Path jcmd = Path.of(System.getProperty("java.home"), "bin", "jcmd");
    Process p = new ProcessBuilder(jcmd.toString(), Long.toString(pid), "PerfCounter.print")
        .redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    if (!p.waitFor(30, TimeUnit.SECONDS) || p.exitValue() != 0) {
      p.destroyForcibly();
      throw new IllegalStateException("jcmd " + pid + " PerfCounter.print failed: " + out.strip());
    }
    return parse(out);
  }

  /** The counters in {@code PerfCounter.print}'s output ({@code name=value} lines). */
  static JvmActivity parse(String perfCounters) {
    Map<String, Long> values = new HashMap<>();
    for (String line : perfCounters.split("\n")) {
      int eq = line.indexOf('=');
      if (eq > 0) {
        String value = line.substring(eq + 1).strip();
        if (value.matches("-?\\d+")) {
          values.put(line.substring(0, eq).strip(), Long.parseLong(value));
        }
      }
    }
    long frequency = require(values, "sun.os.hrt.frequency");
    long collections = 0;
    long collectionTicks = 0;
    for (int i = 0; values.containsKey("sun.gc.collector." + i + ".invocations"); i++) {
      collections += values.get("sun.gc.collector." + i + ".invocations");
      collectionTicks += values.getOrDefault("sun.gc.collector." + i + ".time", 0L);
    }
    return new JvmActivity(require(values, "sun.ci.totalCompiles"),
        nanos(require(values, "java.ci.totalTime"), frequency), collections, nanos(collectionTicks, frequency));
  }

  /** What happened between {@code earlier} and this reading. */
  JvmActivity since(JvmActivity earlier) {
    return new JvmActivity(compiles - earlier.compiles, compileNanos - earlier.compileNanos,
        collections - earlier.collections, collectionNanos - earlier.collectionNanos);
  }

  /** "312 compiles (1 840 ms of compiler threads), 4 collections (12 ms)". */
  String describe() {
    return String.format(Locale.ROOT, "%d compiles (%.0f ms of compiler threads), %d collections (%.1f ms)",
        compiles, compileNanos / 1e6, collections, collectionNanos / 1e6);
  }

  private static long require(Map<String, Long> values, String name) {
    Long value = values.get(name);
    if (value == null) {
      throw new IllegalStateException("PerfCounter.print has no " + name);
    }
    return value;
  }

  private static long nanos(long ticks, long frequency) {
    return Math.round(ticks * (1e9 / frequency));
  }
}
