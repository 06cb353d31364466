package io.disaggusage.extproc.emulator.workers;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * A request as a worker received it.
 *
 * @param query the raw query string, empty when there is none
 * @param headers lower-case names, each with all its values in the order received (two
 *     {@code X-Request-Id} lines are two values)
 */
public record RecordedRequest(String method, String path, String query, Map<String, List<String>> headers, byte[] body) {
  public RecordedRequest {
    Map<String, List<String>> copy = new LinkedHashMap<>();
    headers.forEach((name, values) -> copy.computeIfAbsent(name.toLowerCase(Locale.ROOT), n -> new ArrayList<>()).addAll(values));
    copy.replaceAll((name, values) -> List.copyOf(values));
    headers = Collections.unmodifiableMap(copy);
    body = body.clone();
  }

  @Override
  public byte[] body() {
    return body.clone();
  }

  public String bodyUtf8() {
    return new String(body, StandardCharsets.UTF_8);
  }

  /** All values of header {@code name} (any case), in order; empty when absent. */
  public List<String> headerValues(String name) {
    return headers.getOrDefault(name.toLowerCase(Locale.ROOT), List.of());
  }

  /** The headers as the engines read them: first value of each, lower-case names. */
  Map<String, String> firstHeaderValues() {
    Map<String, String> first = new LinkedHashMap<>();
    headers.forEach((name, values) -> {
      if (!values.isEmpty()) {
        first.put(name, values.get(0));
      }
    });
    return first;
  }
}
