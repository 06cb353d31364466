package io.disaggusage.extproc.emulator.workers;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * What a worker received, for tests to assert on: the completion requests in full, and the health and
 * discovery calls apart (routers poll those, so they would drown the completions).
 */
public final class RequestLog {
  private final List<RecordedRequest> completions = new ArrayList<>();
  private final List<RecordedRequest> probes = new ArrayList<>();

  synchronized void completion(RecordedRequest request) {
    completions.add(request);
  }

  synchronized void probe(RecordedRequest request) {
    probes.add(request);
  }

  /** The {@code /v1/chat/completions} and {@code /v1/completions} requests, in order of arrival. */
  public synchronized List<RecordedRequest> completions() {
    return List.copyOf(completions);
  }

  /** Every other request (health, discovery, metrics, unknown paths), in order of arrival. */
  public synchronized List<RecordedRequest> probes() {
    return List.copyOf(probes);
  }

  /** How many times each non-completion path was called, e.g. {@code /health -> 2}. */
  public synchronized Map<String, Integer> probeCounts() {
    Map<String, Integer> counts = new TreeMap<>();
    probes.forEach(p -> counts.merge(p.path(), 1, Integer::sum));
    return counts;
  }

  /** How many times {@code path} was called. */
  public synchronized int probeCount(String path) {
    return (int) probes.stream().filter(p -> p.path().equals(path)).count();
  }
}
