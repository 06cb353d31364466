package io.disaggusage.extproc.tools;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * The usage a client reads from a chat completion response: the {@code usage} object of a JSON body, or
 * of the last server-sent event that carries one.
 *
 * @param cached {@code prompt_tokens_details.cached_tokens}, -1 when absent
 */
public record ClientUsage(long prompt, long cached, long completion, long total) {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Pattern EVENT_END = Pattern.compile("\\r\\n\\r\\n|\\n\\n|\\r\\r");
  private static final Pattern LINE_END = Pattern.compile("\\r\\n|\\n|\\r");

  /** The usage in {@code body}, if it has one that parses. */
  public static Optional<ClientUsage> read(byte[] body) {
    String text = new String(body, StandardCharsets.UTF_8);
    if (text.stripLeading().startsWith("{")) {
      return parse(text);
    }
    Optional<ClientUsage> last = Optional.empty();
    for (String event : EVENT_END.split(text)) {
      StringBuilder data = new StringBuilder();
      for (String line : LINE_END.split(event)) {
        if (line.startsWith("data:")) {
          data.append(line.substring(line.startsWith("data: ") ? 6 : 5)).append('\n');
        }
      }
      Optional<ClientUsage> usage = parse(data.toString());
      if (usage.isPresent()) {
        last = usage;
      }
    }
    return last;
  }

  private static Optional<ClientUsage> parse(String json) {
    if (!json.stripLeading().startsWith("{")) {
      return Optional.empty();
    }
    try {
      JsonNode usage = JSON.readTree(json).path("usage");
      if (!usage.isObject()) {
        return Optional.empty();
      }
      return Optional.of(
          new ClientUsage(
              usage.path("prompt_tokens").asLong(),
              usage.path("prompt_tokens_details").path("cached_tokens").asLong(-1),
              usage.path("completion_tokens").asLong(),
              usage.path("total_tokens").asLong()));
    } catch (IOException e) {
      return Optional.empty();
    }
  }
}
