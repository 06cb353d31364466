package io.disaggusage.bench.envoy;

import io.disaggusage.bench.e2e.LatencyHistogram;
import io.disaggusage.extproc.testkit.ShippedBootstrap;
import java.time.Instant;
import java.time.format.DateTimeParseException;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * How long Envoy waited for its ext_proc processor on the generation leg, call kind by call kind, as its
 * access log records it ({@link ShippedBootstrap#EXT_PROC_LATENCIES}): the request headers, the request
 * body, the response headers (these three come before the first token) and the response body. One run's
 * lines, or the pooled lines of a cell's runs; only requests that started inside the run's measurement
 * window ({@code %START_TIME%}, millisecond precision) count.
 */
final class ExtProcWaits {
  /** What marks a generation leg's line in the shipped access-log format. */
  static final String GENERATION = " cluster=generation ";
  private static final List<String> KEYS = ShippedBootstrap.EXT_PROC_LATENCIES.stream()
      .map(f -> " " + ShippedBootstrap.EXT_PROC_LATENCY_PREFIX + f + "=").toList();

  private final long fromMillis;
  private final long toMillis;
  private final Map<String, LatencyHistogram> byField = new LinkedHashMap<>();
  private long generationLines;
  private long inWindow;

  /** For the lines of requests that started in {@code [fromMillis, toMillis)} (epoch milliseconds). */
  ExtProcWaits(long fromMillis, long toMillis) {
    this.fromMillis = fromMillis;
    this.toMillis = toMillis;
    ShippedBootstrap.EXT_PROC_LATENCIES.forEach(f -> byField.put(f, new LatencyHistogram()));
  }

  /** None: a run whose Envoy logged nothing of the kind, the neutral element of {@link #merged}. */
  static ExtProcWaits none() {
    return new ExtProcWaits(0, 0);
  }

  /** One access-log line: a generation leg's line counts; its latencies when it started in the window. */
  void accept(CharSequence text) {
    String line = text.toString();
    if (!line.contains(GENERATION)) {
      return;
    }
    generationLines++;
    int close = line.indexOf(']');
    long start;
    try {
      start = line.startsWith("[") && close > 0 ? Instant.parse(line.substring(1, close)).toEpochMilli() : -1;
    } catch (DateTimeParseException e) {
      start = -1;
    }
    if (start < fromMillis || start >= toMillis) {
      return;
    }
    inWindow++;
    for (int i = 0; i < KEYS.size(); i++) {
      int at = line.indexOf(KEYS.get(i));
      if (at < 0) {
        continue;
      }
      long micros = 0;
      int digits = 0;
      for (int p = at + KEYS.get(i).length(); p < line.length() && Character.isDigit(line.charAt(p)); p++, digits++) {
        micros = micros * 10 + (line.charAt(p) - '0');
      }
      if (digits > 0) { // "-": Envoy made no such call
        byField.get(ShippedBootstrap.EXT_PROC_LATENCIES.get(i)).record(micros * 1000);
      }
    }
  }

  /** Generation-leg lines read, window or not: one per generation response Envoy finished. */
  long generationLines() {
    return generationLines;
  }

  /** Generation-leg lines of requests that started in the window. */
  long inWindow() {
    return inWindow;
  }

  /** The waits of one kind ({@link ShippedBootstrap#EXT_PROC_LATENCIES}), in nanoseconds. */
  LatencyHistogram of(String field) {
    return byField.get(field);
  }

  /** The pooled lines of both. */
  static ExtProcWaits merged(ExtProcWaits x, ExtProcWaits y) {
    ExtProcWaits sum = none();
    sum.generationLines = x.generationLines + y.generationLines;
    sum.inWindow = x.inWindow + y.inWindow;
    for (String field : ShippedBootstrap.EXT_PROC_LATENCIES) {
      x.of(field).addTo(sum.of(field));
      y.of(field).addTo(sum.of(field));
    }
    return sum;
  }
}
