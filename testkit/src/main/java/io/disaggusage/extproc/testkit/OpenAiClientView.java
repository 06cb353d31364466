package io.disaggusage.extproc.testkit;

import com.fasterxml.jackson.databind.json.JsonMapper;
import com.openai.core.ObjectMappers;
import com.openai.models.chat.completions.ChatCompletion;
import com.openai.models.chat.completions.ChatCompletionChunk;
import com.openai.models.completions.Completion;
import com.openai.models.completions.CompletionUsage;
import com.openai.models.responses.Response;
import com.openai.models.responses.ResponseUsage;
import java.util.ArrayList;
import java.util.List;

/**
 * Reads client-visible bodies the way a real client does: with the official OpenAI Java SDK's own
 * models and mapper. A body the SDK cannot read fails the test.
 */
public final class OpenAiClientView {
  private static final JsonMapper MAPPER = ObjectMappers.jsonMapper();

  /** The usage numbers a client sees; {@code cached} null when the response has no details. */
  public record ClientUsage(long prompt, Long cached, long completion, long total) {}

  private OpenAiClientView() {}

  public static ClientUsage chatCompletion(String json) throws Exception {
    ChatCompletion c = MAPPER.readValue(json, ChatCompletion.class);
    c.validate();
    return of(c.usage().orElseThrow());
  }

  public static ClientUsage completion(String json) throws Exception {
    Completion c = MAPPER.readValue(json, Completion.class);
    c.validate();
    return of(c.usage().orElseThrow());
  }

  /** The usage of the last chunk that has one, every chunk parsed and validated. */
  public static ClientUsage chatStream(String sse) throws Exception {
    ClientUsage last = null;
    for (String data : dataPayloads(sse)) {
      if (data.equals("[DONE]")) {
        continue;
      }
      ChatCompletionChunk chunk = MAPPER.readValue(data, ChatCompletionChunk.class);
      chunk.validate();
      if (chunk.usage().isPresent()) {
        last = of(chunk.usage().get());
      }
    }
    if (last == null) {
      throw new AssertionError("no usage chunk in stream");
    }
    return last;
  }

  /** Every usage in a stream, in order (continuous usage stats). */
  public static List<ClientUsage> chatStreamUsages(String sse) throws Exception {
    List<ClientUsage> all = new ArrayList<>();
    for (String data : dataPayloads(sse)) {
      if (!data.equals("[DONE]")) {
        MAPPER.readValue(data, ChatCompletionChunk.class).usage().ifPresent(u -> all.add(of(u)));
      }
    }
    return all;
  }

  /** A chat stream as a client reads it: the text of every delta, and every usage, in order. */
  public record ChatStream(String text, List<ClientUsage> usages) {}

  /** Reads a chat stream with every chunk parsed and validated by the SDK, usage or not. */
  public static ChatStream chatStreamRead(String sse) throws Exception {
    StringBuilder text = new StringBuilder();
    List<ClientUsage> usages = new ArrayList<>();
    for (String data : dataPayloads(sse)) {
      if (data.equals("[DONE]")) {
        continue;
      }
      ChatCompletionChunk chunk = MAPPER.readValue(data, ChatCompletionChunk.class);
      chunk.validate();
      chunk.choices().forEach(c -> c.delta().content().ifPresent(text::append));
      chunk.usage().ifPresent(u -> usages.add(of(u)));
    }
    return new ChatStream(text.toString(), usages);
  }

  /**
   * Every usage of a chat stream, in order, as the SDK's stream reader yields them: each unnamed event
   * is a chunk, parsed and validated; a named event (TensorRT-LLM's {@code trtllm.perf_metrics}) is not
   * a chunk and is skipped.
   */
  public static List<ClientUsage> chatStreamUsagesValidated(String sse) throws Exception {
    List<ClientUsage> usages = new ArrayList<>();
    for (String[] event : AnthropicClientView.namedEvents(sse)) {
      if (!event[0].equals("message") || event[1].equals("[DONE]")) {
        continue;
      }
      ChatCompletionChunk chunk = MAPPER.readValue(event[1], ChatCompletionChunk.class);
      chunk.validate();
      chunk.usage().ifPresent(u -> usages.add(of(u)));
    }
    return usages;
  }

  public static ClientUsage response(String json) throws Exception {
    Response r = MAPPER.readValue(json, Response.class);
    return of(r.usage().orElseThrow());
  }

  /** The usage of the {@code response.completed} event of a Responses API stream. */
  public static ClientUsage responseStream(String sse) throws Exception {
    for (String data : dataPayloads(sse)) {
      var node = MAPPER.readTree(data);
      if ("response.completed".equals(node.path("type").asText())) {
        Response r = MAPPER.treeToValue(node.get("response"), Response.class);
        return of(r.usage().orElseThrow());
      }
    }
    throw new AssertionError("no response.completed event");
  }

  private static ClientUsage of(CompletionUsage u) {
    Long cached = u.promptTokensDetails().flatMap(d -> d.cachedTokens()).orElse(null);
    return new ClientUsage(u.promptTokens(), cached, u.completionTokens(), u.totalTokens());
  }

  private static ClientUsage of(ResponseUsage u) {
    return new ClientUsage(u.inputTokens(), u.inputTokensDetails().cachedTokens(), u.outputTokens(), u.totalTokens());
  }

  /** A plain SSE reading, independent of the service's framer: events split on blank lines. */
  public static List<String> dataPayloads(String sse) {
    String normalized = sse.replace("\r\n", "\n").replace('\r', '\n');
    List<String> out = new ArrayList<>();
    for (String event : normalized.split("\n\n")) {
      StringBuilder data = null;
      for (String line : event.split("\n")) {
        if (line.startsWith("data:")) {
          String v = line.substring(5);
          if (v.startsWith(" ")) {
            v = v.substring(1);
          }
          data = data == null ? new StringBuilder(v) : data.append('\n').append(v);
        }
      }
      if (data != null) {
        out.add(data.toString());
      }
    }
    return out;
  }
}
