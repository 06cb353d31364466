package io.disaggusage.extproc.scenario;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

/**
 * The arithmetic every usage object the client gets must obey, in the OpenAI shapes (chat and
 * completions: prompt/completion/total, cached in {@code prompt_tokens_details}; Responses:
 * input/output/total, cached in {@code input_tokens_details}) and Anthropic's (counts only: its input
 * excludes the cache reads, so there is no sum to check). Reads a JSON body or the JSON of each SSE
 * {@code data:} line; text that is not JSON has no usage to check.
 */
final class UsageConsistency {
  private static final ObjectMapper JSON = new ObjectMapper();

  private UsageConsistency() {}

  /** What is wrong with the usage objects of {@code body}, one sentence each; empty when nothing is. */
  static List<String> problems(String body) {
    List<String> problems = new ArrayList<>();
    for (JsonNode doc : documents(body)) {
      usages(doc, problems);
    }
    return problems;
  }

  private static List<JsonNode> documents(String body) {
    List<JsonNode> docs = new ArrayList<>();
    String trimmed = body.strip();
    if (trimmed.startsWith("{")) {
      parse(trimmed, docs);
      return docs;
    }
    body.lines().filter(l -> l.startsWith("data:")).forEach(l -> parse(l.substring(5).strip(), docs));
    return docs;
  }

  private static void parse(String text, List<JsonNode> into) {
    try {
      into.add(JSON.readTree(text));
    } catch (Exception notJson) {
      // [DONE], a malformed body the service passed untouched: nothing to check
    }
  }

  private static void usages(JsonNode node, List<String> problems) {
    if (node.isObject()) {
      for (Iterator<Map.Entry<String, JsonNode>> it = node.fields(); it.hasNext(); ) {
        Map.Entry<String, JsonNode> f = it.next();
        if (f.getKey().equals("usage") && f.getValue().isObject()) {
          check(f.getValue(), problems);
        }
        usages(f.getValue(), problems);
      }
    } else if (node.isArray()) {
      node.forEach(n -> usages(n, problems));
    }
  }

  private static void check(JsonNode usage, List<String> problems) {
    counts(usage, "usage", problems);
    sum(usage, "prompt_tokens", "completion_tokens", "prompt_tokens_details", problems);
    sum(usage, "input_tokens", "output_tokens", "input_tokens_details", problems);
  }

  /** Every number in the usage object (details included) a non-negative integer. */
  private static void counts(JsonNode node, String path, List<String> problems) {
    for (Iterator<Map.Entry<String, JsonNode>> it = node.fields(); it.hasNext(); ) {
      Map.Entry<String, JsonNode> f = it.next();
      JsonNode v = f.getValue();
      if (v.isNumber() && !(v.canConvertToExactIntegral() && v.asLong() >= 0)) {
        problems.add(path + "." + f.getKey() + " = " + v + " is not a non-negative integer");
      } else if (v.isObject()) {
        counts(v, path + "." + f.getKey(), problems);
      }
    }
  }

  /** total = prompt + completion, and cached ≤ prompt, where the object has all of them. */
  private static void sum(JsonNode usage, String prompt, String completion, String details, List<String> problems) {
    JsonNode p = usage.get(prompt);
    JsonNode c = usage.get(completion);
    JsonNode t = usage.get("total_tokens");
    if (p == null || !p.isNumber()) {
      return;
    }
    if (c != null && c.isNumber() && t != null && t.isNumber() && t.asLong() != p.asLong() + c.asLong()) {
      problems.add("total_tokens " + t + " ≠ " + prompt + " " + p + " + " + completion + " " + c + " in " + usage);
    }
    JsonNode cached = usage.path(details).get("cached_tokens");
    if (cached != null && cached.isNumber() && cached.asLong() > p.asLong()) {
      problems.add("cached_tokens " + cached + " > " + prompt + " " + p + " in " + usage);
    }
  }
}
