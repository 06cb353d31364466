package io.disaggusage.extproc.tools.demo;

import java.util.List;

/**
 * One client request of the demo: what the client would have read without the service, what it reads
 * with it, and the truth.
 *
 * @param scenario engine family, response format and order, e.g. {@code TensorRT-LLM SSE generation-first}
 * @param repeat 1 for the cache-busted first request, 2 for the same prompt again
 * @param prompt prompt tokens (the context worker's count)
 * @param cachedWithout cached tokens the generation worker reported (what the client sees without the service)
 * @param cachedWith cached tokens the client read through Envoy and the service
 * @param cachedTrue the context worker's prefix-cache hits
 * @param completion completion tokens the client read
 * @param total total tokens the client read
 * @param outcome the service's {@code outcome} dynamic metadata, {@code -} when there was none
 * @param problems what went wrong in the generation exchange (Envoy's view); empty when nothing did
 */
public record DemoRow(
    String scenario,
    int repeat,
    long prompt,
    long cachedWithout,
    long cachedWith,
    long cachedTrue,
    long completion,
    long total,
    String outcome,
    List<String> problems) {

  public DemoRow {
    problems = List.copyOf(problems);
  }

  /** The client got the truth: the context worker's prompt accounting, cleanly. */
  public boolean truthful() {
    return cachedWith == cachedTrue && total == prompt + completion && problems.isEmpty();
  }
}
