package io.disaggusage.e2e;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The shape of what an engine wrote, without what must differ between two engines answering the same
 * request (ids, text, counts, timings): every key in its order, each value's JSON type ({@code int},
 * {@code float}, {@code str}, {@code null}, objects and arrays spelled out), and a run of equal shapes
 * written once — an array of equal elements, or a stream's content events, whatever their number. What
 * two engines of one release must agree on is kept as written: booleans, and the values of
 * {@link #KEPT} (the object kind, the role, why generation stopped, the model both were given).
 */
final class WireShape {
  /** String members whose values are part of the shape. */
  static final Set<String> KEPT = Set.of("object", "role", "finish_reason", "model");

  private WireShape() {}

  /** The shape of one JSON value. */
  static String of(JsonNode node) {
    return switch (node.getNodeType()) {
      case OBJECT -> {
        StringBuilder out = new StringBuilder("{");
        for (Iterator<Map.Entry<String, JsonNode>> it = node.fields(); it.hasNext(); ) {
          Map.Entry<String, JsonNode> e = it.next();
          JsonNode value = e.getValue();
          String shape = KEPT.contains(e.getKey()) && value.isTextual() ? value.toString() : of(value);
          out.append(e.getKey()).append(':').append(shape).append(it.hasNext() ? "," : "");
        }
        yield out.append('}').toString();
      }
      case ARRAY -> {
        List<String> elements = new ArrayList<>();
        node.forEach(e -> elements.add(of(e)));
        yield "[" + String.join(",", runs(elements)) + "]";
      }
      case NUMBER -> node.isIntegralNumber() ? "int" : "float";
      case STRING -> "str";
      case BOOLEAN -> node.toString();
      case NULL -> "null";
      default -> node.getNodeType().name();
    };
  }

  /**
   * The shapes of a server-sent event stream's events, equal consecutive ones written once, after
   * checking its framing: every event one {@code data: } line and a blank line, no comments or other
   * fields, the last one {@code data: [DONE]}.
   */
  static List<String> events(String stream) {
    if (!stream.endsWith("data: [DONE]\n\n")) {
      throw new AssertionError("the stream does not end with data: [DONE] and a blank line: " + tail(stream));
    }
    List<String> shapes = new ArrayList<>();
    String[] events = stream.substring(0, stream.length() - 2).split("\n\n", -1);
    for (String event : events) {
      if (!event.startsWith("data: ") || event.contains("\n")) {
        throw new AssertionError("not one data line: " + event);
      }
      String data = event.substring("data: ".length());
      shapes.add(data.equals("[DONE]") ? "[DONE]" : of(RouterClients.parseJson(data)));
    }
    return runs(shapes);
  }

  /** The JSON of every {@code data:} line of a stream but {@code [DONE]}, in order. */
  static List<String> data(String stream) {
    List<String> out = new ArrayList<>();
    for (String line : stream.split("\n")) {
      if (line.startsWith("data: {")) {
        out.add(line.substring("data: ".length()));
      }
    }
    return out;
  }

  /** {@code shapes} with each run of equal consecutive shapes written once. */
  static List<String> runs(List<String> shapes) {
    List<String> out = new ArrayList<>();
    for (String shape : shapes) {
      if (out.isEmpty() || !out.get(out.size() - 1).equals(shape)) {
        out.add(shape);
      }
    }
    return out;
  }

  private static String tail(String text) {
    return text.substring(Math.max(0, text.length() - 200));
  }
}
