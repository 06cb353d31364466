package io.disaggusage.extproc.scenario;

import io.disaggusage.extproc.testkit.Wire;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.json.JsonMapper;

/**
 * What a worker streams back for the chat request it actually received: content chunks, then the
 * usage-only chunk if and only if the request asked for usage (engines.md: {@code stream_options} with
 * {@code include_usage}, whose default when {@code stream_options} is given without it is {@code true}
 * on vLLM and TensorRT-LLM and {@code false} on SGLang), then {@code [DONE]}. The wire shapes are
 * {@link Wire}'s.
 */
enum StreamingEngine {
  VLLM(true),
  SGLANG(false);

  private static final JsonMapper JSON = new JsonMapper();
  private final boolean includeUsageByDefault;

  StreamingEngine(boolean includeUsageByDefault) {
    this.includeUsageByDefault = includeUsageByDefault;
  }

  /** Whether this engine sends a usage chunk for {@code requestBody}. */
  boolean sendsUsage(String requestBody) throws Exception {
    JsonNode options = JSON.readTree(requestBody).path("stream_options");
    if (!options.isObject()) {
      return false;
    }
    JsonNode include = options.path("include_usage");
    return include.isBoolean() ? include.booleanValue() : includeUsageByDefault;
  }

  /** The stream answering {@code requestBody}: {@code contents} as chunks, usage if asked, [DONE]. */
  String chatStream(String requestBody, String usage, String... contents) throws Exception {
    StringBuilder sb = new StringBuilder();
    for (String c : contents) {
      sb.append(Wire.chunk(c));
    }
    if (sendsUsage(requestBody)) {
      sb.append(Wire.usageChunk(usage));
    }
    return sb.append(Wire.DONE).toString();
  }
}
