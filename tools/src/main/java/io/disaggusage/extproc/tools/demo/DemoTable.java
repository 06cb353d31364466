package io.disaggusage.extproc.tools.demo;

import io.disaggusage.extproc.emulator.engines.PrefixCache;
import java.util.List;
import java.util.Locale;

/** The demo's report as text: the table of requests, the cache-hit ratios and what to make of them. */
public final class DemoTable {
  static final String HEADER_FORMAT = "%-34s %-4s %6s %9s %8s %5s %11s %6s  %s%n";
  /** Where the three cached_tokens columns start. */
  private static final int CACHED_COLUMN = 34 + 1 + 4 + 1 + 6 + 1;
  private static final String ROW_FORMAT = "%-34s %-4s %6d %9d %8d %5d %11d %6d  %s%n";

  private DemoTable() {}

  public static String render(DemoRun.Report report) {
    List<DemoRow> rows = report.rows();
    StringBuilder out = new StringBuilder();
    out.append(
        format(
            """
            disagg-usage-extproc demo: simulated TensorRT-LLM and vLLM prefill/decode deployments, their worker
            calls through a fake Envoy (the shipped ext_proc filter settings, Envoy 1.37 rules, message_timeout
            %d ms) to the service, running in this process on 127.0.0.1:%d. Each scenario sends a cache-busted
            prompt (1st), then the same prompt again (2nd).

            """,
            report.messageTimeout().toMillis(), report.servicePort()));
    out.append(" ".repeat(CACHED_COLUMN)).append("---- cached_tokens ----\n");
    out.append(format(HEADER_FORMAT, "scenario", "req", "prompt", "without", "with", "true", "completion", "total", "outcome"));
    for (DemoRow r : rows) {
      out.append(
          format(
              ROW_FORMAT,
              r.scenario(), r.repeat() == 1 ? "1st" : "2nd", r.prompt(), r.cachedWithout(), r.cachedWith(),
              r.cachedTrue(), r.completion(), r.total(), r.outcome()));
    }
    out.append(
        """

        without: what the client reads without the service (the generation worker's usage)
        with:    what it reads through Envoy and the service;  true: the context worker's prefix-cache hits
        """);
    long prompt = rows.stream().mapToLong(DemoRow::prompt).sum();
    out.append(format("%ncache-hit ratio over the %d requests (cached / prompt tokens):%n", rows.size()));
    out.append(ratio("without the service", rows.stream().mapToLong(DemoRow::cachedWithout).sum(), prompt,
        "the generation worker counts the KV it received as cached"));
    out.append(ratio("with the service", rows.stream().mapToLong(DemoRow::cachedWith).sum(), prompt, ""));
    out.append(ratio("true", rows.stream().mapToLong(DemoRow::cachedTrue).sum(), prompt,
        "the context workers' prefix caches"));
    out.append('\n');
    List<DemoRow> wrong = rows.stream().filter(r -> !r.truthful()).toList();
    if (wrong.isEmpty()) {
      out.append(
          format("OK: all %d responses reached the client with the context worker's prompt and cached tokens.%n", rows.size()));
    } else {
      for (DemoRow r : wrong) {
        out.append(format("NOT CORRECTED: %s, %s request: cached %d, true %d%s%n", r.scenario(),
            r.repeat() == 1 ? "1st" : "2nd", r.cachedWith(), r.cachedTrue(),
            r.problems().isEmpty() ? "" : "; " + String.join("; ", r.problems())));
      }
    }
    out.append(
        format(
            """
            Tokens come from a simple deterministic word tokenizer (words, numbers and punctuation marks; one
            token per chat role marker), not a real model's. Each context worker has a prefix cache of %d-token
            blocks (LRU; the last prompt token is always computed). The TensorRT-LLM generation worker reports
            the whole transferred prompt as cached, the vLLM one (NIXL) the prompt minus one token.
            """,
            PrefixCache.DEFAULT_BLOCK_TOKENS));
    return out.toString();
  }

  private static String ratio(String label, long cached, long prompt, String note) {
    String percent = prompt == 0 ? "-" : format("%.1f %%", 100.0 * cached / prompt);
    return format("  %-20s %7s%s%n", label, percent, note.isEmpty() ? "" : "   (" + note + ")");
  }

  private static String format(String format, Object... args) {
    return String.format(Locale.ROOT, format, args);
  }
}
