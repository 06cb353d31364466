package io.disaggusage.e2e;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.disaggusage.extproc.testkit.Wire;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;

/**
 * vLLM prefill and decode workers for every API the SDK clients call, answering with vLLM's wire shapes
 * (engines.md; the server suite's {@link Wire}): the prefill worker reports the truth — 101 prompt tokens,
 * 7 of them cached — and the decode worker the disaggregation bug — all 101 cached — with 13 completion
 * tokens. JSON or SSE as the request's {@code stream} asks.
 */
final class VllmWorkers {
  static final int PROMPT = 101;
  static final int CACHED = 7;
  static final int COMPLETION = 13;

  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Duration PAUSE = Duration.ofMillis(2);

  private VllmWorkers() {}

  static Worker.Reply prefill(Worker.Received request) {
    String path = request.path();
    String body;
    if (path.startsWith("/v1/responses")) {
      body = Wire.response(responsesUsage(1, CACHED));
    } else if (path.startsWith("/v1/messages")) {
      body = Wire.prefillMessage(Wire.messagesUsage(PROMPT - CACHED, 1, 0L, (long) CACHED));
    } else if (path.startsWith("/v1/completions")) {
      body = Wire.completion(Wire.usage(PROMPT, 1, (long) CACHED));
    } else {
      body = Wire.chatCompletion("p", Wire.usage(PROMPT, 1, (long) CACHED));
    }
    return Worker.Reply.paced("application/json", bytes(body), 2, PAUSE);
  }

  static Worker.Reply decode(Worker.Received request) {
    String path = request.path();
    boolean stream = parse(request.body()).path("stream").asBoolean(false);
    String usage = Wire.usage(PROMPT, COMPLETION, (long) PROMPT);
    String body;
    if (path.startsWith("/v1/responses")) {
      body = stream ? Wire.responseStream(responsesUsage(COMPLETION, PROMPT)) : Wire.response(responsesUsage(COMPLETION, PROMPT));
    } else if (path.startsWith("/v1/messages")) {
      String gen = Wire.messagesUsage(0, COMPLETION, 0L, (long) PROMPT);
      body = stream ? Wire.messageStream(Wire.messagesUsage(PROMPT, 0, null, null), gen, "Par", "is", ".") : Wire.message(gen);
    } else if (path.startsWith("/v1/completions")) {
      body = stream ? completionStream(usage, " Par", "is") : Wire.completion(usage);
    } else {
      body = stream ? Wire.chatStream(usage, "Par", "is", " the", " capital") : Wire.chatCompletion("d", usage);
    }
    return Worker.Reply.paced(stream ? "text/event-stream" : "application/json", bytes(body), stream ? 6 : 2, PAUSE);
  }

  private static String responsesUsage(int output, int cached) {
    return "{\"input_tokens\":" + PROMPT + ",\"input_tokens_details\":{\"cached_tokens\":" + cached + "},\"output_tokens\":"
        + output + ",\"output_tokens_details\":{\"reasoning_tokens\":0},\"total_tokens\":" + (PROMPT + output) + "}";
  }

  /** vLLM's legacy completions stream: text chunks, the usage chunk, [DONE]. */
  private static String completionStream(String usage, String... texts) {
    StringBuilder sb = new StringBuilder();
    for (String text : texts) {
      sb.append("data: {\"id\":\"cmpl-s\",\"object\":\"text_completion\",\"created\":1764400000,\"model\":\"").append(Wire.MODEL)
          .append("\",\"choices\":[{\"index\":0,\"text\":\"").append(text).append("\",\"logprobs\":null,\"finish_reason\":null}]}\n\n");
    }
    return sb.append("data: {\"id\":\"cmpl-s\",\"object\":\"text_completion\",\"created\":1764400000,\"model\":\"")
        .append(Wire.MODEL).append("\",\"choices\":[],\"usage\":").append(usage).append("}\n\n").append(Wire.DONE).toString();
  }

  private static JsonNode parse(byte[] body) {
    try {
      return JSON.readTree(body);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static byte[] bytes(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }
}
