package io.disaggusage.extproc.testkit;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * One line of the shipped access log format:
 * {@code [time] METHOD PATH STATUS cluster=... duration=...ms usage_outcome=... prompt_tokens=...}.
 * Envoy prints {@code -} for metadata the service did not send.
 */
public record AccessLogLine(String method, String path, int status, Map<String, String> fields) {
  public static AccessLogLine parse(String line) {
    String rest = line.substring(line.indexOf(']') + 2);
    String[] words = rest.split(" ");
    Map<String, String> fields = new LinkedHashMap<>();
    for (int i = 3; i < words.length; i++) {
      int eq = words[i].indexOf('=');
      if (eq > 0) {
        fields.put(words[i].substring(0, eq), words[i].substring(eq + 1));
      }
    }
    return new AccessLogLine(words[0], words[1], Integer.parseInt(words[2]), fields);
  }

  public String field(String name) {
    return fields.getOrDefault(name, "-");
  }

  /** Envoy's {@code duration=...ms}: from the first request byte to the last response byte. */
  public long durationMillis() {
    return Long.parseLong(field("duration").replace("ms", ""));
  }

  public String cluster() {
    return field("cluster");
  }
}
