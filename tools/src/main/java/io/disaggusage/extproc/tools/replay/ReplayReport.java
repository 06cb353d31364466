package io.disaggusage.extproc.tools.replay;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.google.protobuf.Struct;
import com.google.protobuf.Value;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * What {@code replay} prints about a {@link Replay.Result}: the dynamic metadata as JSON, and a one-line
 * outcome that says what happened and, when the generation response was not corrected, why it may not
 * have been.
 *
 * @param namespace the service's dynamic-metadata namespace
 * @param generationResponse the generation response as the worker sent it
 */
public record ReplayReport(Replay.Result result, String namespace, byte[] generationResponse) {
  private static final ObjectMapper JSON = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);
  private static final double EXACT_DOUBLE_LIMIT = 9.007199254740992E15;

  private static final Map<String, String> WHY =
      Map.of(
          "passthrough_no_context",
          "no context usage for this generation exchange: check that the context leg is classified as"
              + " context and that both legs carry the same correlation key",
          "context_timeout", "the context usage did not arrive within ordering.context_wait",
          "fingerprint_mismatch",
          "the correlation key held context usage of another prompt only (a shared X-Request-Id or a forged"
              + " context leg): both legs must carry the same model and prompt",
          "not_disaggregated",
          "not recognised as a leg of a disaggregated flow (path, phase markers, cluster names), or not 2xx",
          "no_usage", "the response carries no usage object (did the client ask for stream_options.include_usage?)",
          "parse_error", "the usage or the body does not parse: passed through unchanged",
          "oversize", "a body, event or usage object is above its limits.* cap: passed through unchanged",
          "error", "internal error: passed through unchanged");

  /** The body the client received from the generation exchange. */
  public byte[] clientBody() {
    return result.generation().clientResponse().body();
  }

  /** The service's {@code outcome} for the generation exchange, {@code -} when it left none. */
  public String outcome() {
    return result.generation().accessLog("%DYNAMIC_METADATA(" + namespace + ":outcome)%");
  }

  /** Every namespace of the generation exchange's dynamic metadata, as indented JSON with sorted keys. */
  public String metadataJson() {
    ObjectNode root = JsonNodeFactory.instance.objectNode();
    new TreeMap<>(result.generation().dynamicMetadata()).forEach((ns, struct) -> root.set(ns, json(struct)));
    try {
      return JSON.writeValueAsString(root);
    } catch (JsonProcessingException e) {
      throw new IllegalStateException("a JSON tree always serialises", e);
    }
  }

  /** One line: the failure, or the outcome with the corrected figures, or the outcome with a likely reason. */
  public String outcomeLine() {
    List<String> problems = result.problems();
    if (!problems.isEmpty()) {
      return "FAILED: " + String.join("; ", problems);
    }
    String outcome = outcome();
    boolean changed = !Arrays.equals(clientBody(), generationResponse);
    if (outcome.equals("rewritten")) {
      String figures =
          String.format(
              "cached_tokens %s -> %s, prompt_tokens %s, completion_tokens %s, total_tokens %s",
              value("reported_cached_tokens"), value("cached_tokens"), value("prompt_tokens"),
              value("completion_tokens"), value("total_tokens"));
      return "rewritten: " + figures + (changed ? "" : " (the usage was already right: body unchanged)");
    }
    if (outcome.equals("-")) {
      return "- (no dynamic metadata in namespace " + namespace + "): the service did not read the generation"
          + " response, or the filter's metadata_options.receiving_namespaces does not list " + namespace
          + "; body " + (changed ? "CHANGED" : "unchanged");
    }
    return outcome + ": " + WHY.getOrDefault(outcome, "see docs/behaviour.md §7") + "; body "
        + (changed ? "CHANGED" : "unchanged");
  }

  private String value(String key) {
    return result.generation().accessLog("%DYNAMIC_METADATA(" + namespace + ":" + key + ")%");
  }

  private static ObjectNode json(Struct struct) {
    ObjectNode node = JsonNodeFactory.instance.objectNode();
    new TreeMap<>(struct.getFieldsMap()).forEach((k, v) -> node.set(k, json(v)));
    return node;
  }

  private static JsonNode json(Value v) {
    JsonNodeFactory f = JsonNodeFactory.instance;
    return switch (v.getKindCase()) {
      case STRUCT_VALUE -> json(v.getStructValue());
      case LIST_VALUE -> {
        var array = f.arrayNode();
        v.getListValue().getValuesList().forEach(item -> array.add(json(item)));
        yield array;
      }
      case STRING_VALUE -> f.textNode(v.getStringValue());
      case BOOL_VALUE -> f.booleanNode(v.getBoolValue());
      case NUMBER_VALUE -> {
        double d = v.getNumberValue();
        // Integral counts print as integers, as in Envoy's access logs.
        yield d == Math.rint(d) && Math.abs(d) < EXACT_DOUBLE_LIMIT ? f.numberNode((long) d) : f.numberNode(d);
      }
      case NULL_VALUE, KIND_NOT_SET -> f.nullNode();
    };
  }
}
