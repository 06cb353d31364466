package io.disaggusage.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * What a client must read after a real prefill/decode flow, derived from what the real legs answered
 * (behaviour.md §2): prompt tokens and every {@code prompt_tokens_details} key from the prefill's usage,
 * completion from the decode's, total their sum, every other key and every byte outside {@code usage} as
 * the decode engine wrote them.
 */
final class RealFlowCheck {
  private static final Pattern USAGE = Pattern.compile("\"usage\"\\s*:\\s*\\{");

  private RealFlowCheck() {}

  /** The usage §2 gives the client for the context usage {@code c} and the generation usage {@code g}. */
  static JsonNode expected(JsonNode c, JsonNode g) {
    ObjectNode usage = g.deepCopy();
    long prompt = c.path("prompt_tokens").asLong();
    usage.put("prompt_tokens", prompt);
    ObjectNode details = g.path("prompt_tokens_details").isObject()
        ? ((ObjectNode) g.get("prompt_tokens_details")).deepCopy() : RouterClients.JSON.createObjectNode();
    JsonNode truth = c.path("prompt_tokens_details");
    truth.fields().forEachRemaining(e -> details.set(e.getKey(), e.getValue()));
    long cached = truth.path("cached_tokens").isIntegralNumber() ? truth.get("cached_tokens").asLong() : 0;
    details.put("cached_tokens", Math.max(0, Math.min(prompt, cached)));
    usage.set("prompt_tokens_details", details);
    usage.put("total_tokens", prompt + g.path("completion_tokens").asLong());
    return RouterClients.parseJson(usage.toString()); // numbers as a parser reads them, for equality
  }

  /** {@code text} with the members of every {@code usage} object removed: the bytes §2 keeps as they were. */
  static String outsideUsage(String text) {
    StringBuilder out = new StringBuilder();
    Matcher m = USAGE.matcher(text);
    int at = 0;
    while (m.find(at)) {
      int depth = 1;
      int end = m.end();
      while (depth > 0) {
        char ch = text.charAt(end++);
        depth += ch == '{' ? 1 : ch == '}' ? -1 : 0;
      }
      out.append(text, at, m.end()).append('}');
      at = end;
    }
    return out.append(text.substring(at)).toString();
  }

  /** The usage objects of a JSON body (one) or of every SSE event that carries a non-null one, in order. */
  static List<JsonNode> usages(String body, boolean stream) {
    List<JsonNode> usages = new ArrayList<>();
    if (!stream) {
      usages.add(RouterClients.parseJson(body).path("usage"));
      return usages;
    }
    for (String line : body.split("\n")) {
      if (line.startsWith("data: {")) {
        JsonNode event = RouterClients.parseJson(line.substring("data: ".length()));
        if (event.hasNonNull("usage")) {
          usages.add(event.get("usage"));
        }
      }
    }
    return usages;
  }

  /**
   * The client's body against the real legs: each usage the client read is §2's for the prefill's usage
   * and the decode's usage in the same place, the rest of the bytes are the decode engine's; returns the
   * last usage the client read.
   */
  static JsonNode assertCorrected(RecordingHop.Exchange prefill, RecordingHop.Exchange decode, String client, boolean stream) {
    assertThat(prefill.status()).as(prefill.responseText()).isEqualTo(200);
    assertThat(decode.status()).as(decode.responseText()).isEqualTo(200);
    JsonNode c = RouterClients.parseJson(prefill.responseText()).path("usage");
    List<JsonNode> engine = usages(decode.responseText(), stream);
    List<JsonNode> read = usages(client, stream);
    assertThat(engine).as("usage in the decode engine's answer").isNotEmpty();
    assertThat(outsideUsage(client)).as("every byte outside usage as the decode engine wrote it")
        .isEqualTo(outsideUsage(decode.responseText()));
    assertThat(read).hasSameSizeAs(engine);
    for (int i = 0; i < engine.size(); i++) {
      assertThat(read.get(i)).as("usage %d of %d; the prefill's %s, the decode's %s", i + 1, engine.size(), c, engine.get(i))
          .isEqualTo(expected(c, engine.get(i)));
    }
    return read.get(read.size() - 1);
  }

  /** The Envoy access-log line of the generation leg: outcome rewritten and the counts the client read. */
  static void assertMetadata(AccessLogLine line, JsonNode read, JsonNode reportedUsage) {
    assertThat(line.status()).isEqualTo(200);
    assertThat(line.field("usage_outcome")).as(line.toString()).isEqualTo("rewritten");
    assertThat(line.field("prompt_tokens")).as(line.toString()).isEqualTo(read.path("prompt_tokens").asText());
    assertThat(line.field("cached_tokens")).as(line.toString())
        .isEqualTo(read.path("prompt_tokens_details").path("cached_tokens").asText());
    assertThat(line.field("completion_tokens")).as(line.toString()).isEqualTo(read.path("completion_tokens").asText());
    assertThat(line.field("total_tokens")).as(line.toString()).isEqualTo(read.path("total_tokens").asText());
    assertThat(line.field("reported_cached_tokens")).as(line.toString())
        .isEqualTo(Long.toString(reportedUsage.path("prompt_tokens_details").path("cached_tokens").asLong()));
    assertThat(line.field("model")).as(line.toString()).isEqualTo(RealVllmPair.MODEL);
  }
}
