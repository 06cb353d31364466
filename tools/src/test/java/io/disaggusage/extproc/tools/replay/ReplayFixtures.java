package io.disaggusage.extproc.tools.replay;

import io.disaggusage.extproc.emulator.engines.ClientRequest;
import io.disaggusage.extproc.emulator.engines.DisaggEngine;
import io.disaggusage.extproc.emulator.engines.PrefixCache;
import io.disaggusage.extproc.emulator.engines.ScheduleOrder;
import io.disaggusage.extproc.emulator.engines.TrtLlmEngine;
import io.disaggusage.extproc.emulator.engines.VllmEngine;
import io.disaggusage.extproc.emulator.engines.WordTokenizer.Message;
import io.disaggusage.extproc.emulator.engines.WorkerCall;
import io.disaggusage.extproc.emulator.engines.WorkerReply;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

/**
 * Captured exchanges for the replay tests, made by the simulated engines: the second of two identical
 * requests, so the context worker's cache hit is not zero and differs from what the generation worker
 * reports.
 */
public final class ReplayFixtures {
  private ReplayFixtures() {}

  /** One request's two legs as files in a directory. */
  public record Capture(Path dir, WorkerCall contextCall, WorkerReply context, WorkerCall generationCall, WorkerReply generation) {
    public Path contextRequest() {
      return dir.resolve("context-request.json");
    }

    public Path contextResponse() {
      return dir.resolve("context-response.json");
    }

    public Path generationRequest() {
      return dir.resolve("generation-request.json");
    }

    public Path generationResponse() {
      return dir.resolve("generation-response.body");
    }

    /** {@code name: value} lines of the call's headers, pseudo-headers first. */
    public Path requestHeaders(String leg) {
      return dir.resolve(leg + "-request.headers");
    }

    /** The generation worker's own (wrong) cached count: the prompt, or the prompt minus one (vLLM). */
    public long reportedCached() {
      long prompt = generation.truth().prompt();
      return generation.bodyUtf8().contains("\"cached_tokens\":" + prompt + "}") ? prompt : prompt - 1;
    }

    /** The generation response as the client must get it: the context worker's cached count. */
    /**
     * The generation body with the context's cached count, and (vLLM) the context's
     * {@code created_cache_tokens} where the decode wrote its own 0.
     */
    public String expectedClientBody() {
      String cached = "\"cached_tokens\":" + context.truth().cached();
      String reported = "\"cached_tokens\":" + reportedCached();
      java.util.regex.Matcher created =
          java.util.regex.Pattern.compile("\"created_cache_tokens\":(\\d+)").matcher(context.bodyUtf8());
      if (created.find()) {
        return generation.bodyUtf8().replace(reported + ",\"created_cache_tokens\":0", cached + ",\"created_cache_tokens\":" + created.group(1));
      }
      return generation.bodyUtf8().replace(reported + "}", cached + "}");
    }
  }

  public static Capture tensorRtLlm(Path dir, ScheduleOrder order, boolean stream) throws IOException {
    return capture(dir, new TrtLlmEngine(new PrefixCache(16, 256)), order, stream);
  }

  public static Capture vllm(Path dir, boolean stream) throws IOException {
    return capture(dir, new VllmEngine(new PrefixCache(16, 256)), ScheduleOrder.CONTEXT_FIRST, stream);
  }

  private static Capture capture(Path dir, DisaggEngine engine, ScheduleOrder order, boolean stream) throws IOException {
    ClientRequest request =
        new ClientRequest(
            "meta-llama/Llama-3.1-8B-Instruct",
            List.of(new Message("user", "Which worker's cached_tokens should a bill trust, and why? ".repeat(6))),
            12,
            stream);
    engine.context(engine.contextCall(request, order));
    WorkerCall contextCall = engine.contextCall(request, order);
    WorkerReply context = engine.context(contextCall);
    WorkerCall generationCall = engine.generationCall(request, order, contextCall, context);
    WorkerReply generation = engine.generation(generationCall);
    Capture c = new Capture(dir, contextCall, context, generationCall, generation);
    Files.createDirectories(dir);
    Files.write(c.contextRequest(), contextCall.body());
    Files.write(c.contextResponse(), context.body());
    Files.write(c.generationRequest(), generationCall.body());
    Files.write(c.generationResponse(), generation.body());
    writeHeaders(c.requestHeaders("context"), contextCall);
    writeHeaders(c.requestHeaders("generation"), generationCall);
    return c;
  }

  private static void writeHeaders(Path file, WorkerCall call) throws IOException {
    StringBuilder text = new StringBuilder(":method: POST\n:path: " + call.path() + "\n");
    for (Map.Entry<String, String> h : call.headers().entrySet()) {
      text.append(h.getKey()).append(": ").append(h.getValue()).append('\n');
    }
    Files.writeString(file, text);
  }
}
