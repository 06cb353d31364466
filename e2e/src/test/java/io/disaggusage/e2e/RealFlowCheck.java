package io.disaggusage.e2e;

import io.disaggusage.extproc.testkit.AccessLogLine;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.disaggusage.extproc.testkit.OutsideUsage;
import java.util.ArrayList;
import java.util.List;

/**
 * What a client must read after a real prefill/decode flow, derived from what the real legs answered
 * (behaviour.md §2): prompt tokens and every {@code prompt_tokens_details} key from the prefill's usage,
 * completion from the decode's, total their sum, every other key and every byte outside {@code usage} as
 * the decode engine wrote them.
 */
final class RealFlowCheck {
  private RealFlowCheck() {}

  /**
   * The usage §2 gives the client for the context usage {@code c} and the generation usage {@code g}.
   * A usage keeps its own shape: a detail key {@code g} lacks is added only when {@code c}'s value is not
   * null, and a content event's running usage ({@code runningUsage}: vLLM's continuous usage, whose
   * event carries choices) gains no member at all.
   */
  static JsonNode expected(JsonNode c, JsonNode g, boolean runningUsage) {
    ObjectNode usage = g.deepCopy();
    long prompt = c.path("prompt_tokens").asLong();
    usage.put("prompt_tokens", prompt);
    JsonNode truth = c.path("prompt_tokens_details");
    long cached = truth.path("cached_tokens").isIntegralNumber() ? truth.get("cached_tokens").asLong() : 0;
    if (g.path("prompt_tokens_details").isObject()) {
      ObjectNode details = (ObjectNode) usage.get("prompt_tokens_details");
      truth.fields().forEachRemaining(e -> {
        if (details.has(e.getKey()) || (!runningUsage && !e.getValue().isNull())) {
          details.set(e.getKey(), e.getValue());
        }
      });
      details.put("cached_tokens", Math.max(0, Math.min(prompt, cached)));
    } else if (!runningUsage) {
      ObjectNode details = truth.isObject() ? ((ObjectNode) truth).deepCopy() : RouterClients.JSON.createObjectNode();
      details.put("cached_tokens", Math.max(0, Math.min(prompt, cached)));
      usage.set("prompt_tokens_details", details);
    }
    usage.put("total_tokens", prompt + g.path("completion_tokens").asLong());
    return RouterClients.parseJson(usage.toString()); // numbers as a parser reads them, for equality
  }

  /** A usage the client read and whether its event carries content (a running usage, SSE only). */
  record Usage(JsonNode usage, boolean runningUsage) {}

  /** The usage objects of a JSON body (one) or of every SSE event that carries a non-null one, in order. */
  static List<Usage> usages(String body, boolean stream) {
    List<Usage> usages = new ArrayList<>();
    if (!stream) {
      usages.add(new Usage(RouterClients.parseJson(body).path("usage"), false));
      return usages;
    }
    for (String data : WireShape.data(body)) {
      JsonNode event = RouterClients.parseJson(data);
      if (event.hasNonNull("usage")) {
        usages.add(new Usage(event.get("usage"), event.path("choices").size() > 0));
      }
    }
    return usages;
  }

  /** The usage objects alone, as {@link #usages} finds them. */
  static List<JsonNode> usageObjects(String body, boolean stream) {
    return usages(body, stream).stream().map(Usage::usage).toList();
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
    List<Usage> engine = usages(decode.responseText(), stream);
    List<Usage> read = usages(client, stream);
    assertThat(engine).as("usage in the decode engine's answer").isNotEmpty();
    assertThat(OutsideUsage.of(client)).as("every byte outside usage as the decode engine wrote it")
        .isEqualTo(OutsideUsage.of(decode.responseText()));
    assertThat(read).hasSameSizeAs(engine);
    for (int i = 0; i < engine.size(); i++) {
      Usage g = engine.get(i);
      assertThat(read.get(i).usage()).as("usage %d of %d; the prefill's %s, the decode's %s", i + 1, engine.size(), c, g.usage())
          .isEqualTo(expected(c, g.usage(), g.runningUsage()));
    }
    return read.get(read.size() - 1).usage();
  }

  /** The Envoy access-log line of the generation leg: outcome rewritten and the counts the client read. */
  static void assertMetadata(AccessLogLine line, JsonNode read, JsonNode reportedUsage) {
    assertMetadata(line, read, reportedUsage, "rewritten");
  }

  /** The same with outcome {@code outcome} ({@code impossible_count} when the decode reported a count that cannot be true). */
  static void assertMetadata(AccessLogLine line, JsonNode read, JsonNode reportedUsage, String outcome) {
    assertMetadata(line, read, reportedUsage, outcome, RealVllmPair.MODEL);
  }

  /** The same for a flow of {@code model} (a simulated engine's). */
  static void assertMetadata(AccessLogLine line, JsonNode read, JsonNode reportedUsage, String outcome, String model) {
    assertThat(line.status()).isEqualTo(200);
    assertThat(line.field("usage_outcome")).as(line.toString()).isEqualTo(outcome);
    assertThat(line.field("prompt_tokens")).as(line.toString()).isEqualTo(read.path("prompt_tokens").asText());
    assertThat(line.field("cached_tokens")).as(line.toString())
        .isEqualTo(read.path("prompt_tokens_details").path("cached_tokens").asText());
    assertThat(line.field("completion_tokens")).as(line.toString()).isEqualTo(read.path("completion_tokens").asText());
    assertThat(line.field("total_tokens")).as(line.toString()).isEqualTo(read.path("total_tokens").asText());
    assertThat(line.field("reported_cached_tokens")).as(line.toString())
        .isEqualTo(Long.toString(reportedUsage.path("prompt_tokens_details").path("cached_tokens").asLong()));
    assertThat(line.field("model")).as(line.toString()).isEqualTo(model);
  }
}
