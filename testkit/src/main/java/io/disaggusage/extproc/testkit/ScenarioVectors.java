package io.disaggusage.extproc.testkit;

import static io.disaggusage.extproc.testkit.EngineRequests.PATH;
import static io.disaggusage.extproc.testkit.EngineRequests.TRT_ID;
import static io.disaggusage.extproc.testkit.EngineRequests.TRT_RETRY_ID;
import static io.disaggusage.extproc.testkit.EngineRequests.trtRequest;
import static io.disaggusage.extproc.testkit.EngineRequests.vllmDecode;
import static io.disaggusage.extproc.testkit.EngineRequests.vllmPrefill;

import io.disaggusage.extproc.testkit.AnthropicClientView.MessagesUsage;
import io.disaggusage.extproc.testkit.OpenAiClientView.ClientUsage;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The engine vectors as data: each scenario's context and generation exchanges, the order the
 * orchestrator runs them in, the exact bytes the client must get from the generation worker, and the
 * usage its SDK must read and the service must report ({@link ExpectedUsage}). The server's
 * {@code ExchangeSpecificationTest} runs every vector of {@link #specification} over driver × chunking ×
 * store; the property tests (chunk invariance), the fuzz corpus seeds and the soak test run on
 * {@link #all}.
 */
public final class ScenarioVectors {
  private ScenarioVectors() {}

  /** How the orchestrator orders the two legs. */
  public enum Order {
    /** The context response has ended before the generation request starts. */
    CONTEXT_FIRST,
    /** The whole generation response reaches Envoy before the context response body. */
    GENERATION_FIRST,
    /** No context leg: the generation request carries the context usage itself. */
    CARRIED
  }

  /** One exchange: request and response as the worker pool sees them. */
  public record Leg(
      String path,
      Map<String, String> requestHeaders,
      String cluster,
      byte[] requestBody,
      String contentType,
      byte[] responseBody) {

    /** Request headers as Envoy sends them (pseudo-headers first). */
    public Map<String, String> envoyRequestHeaders() {
      Map<String, String> h = new LinkedHashMap<>();
      h.put(":method", "POST");
      h.put(":path", path);
      h.put(":authority", "workers");
      h.put(":scheme", "http");
      h.put("content-type", "application/json");
      h.putAll(requestHeaders);
      return h;
    }

    public Map<String, String> envoyResponseHeaders() {
      Map<String, String> h = new LinkedHashMap<>();
      h.put(":status", "200");
      h.put("content-type", contentType);
      h.put("content-length", Integer.toString(responseBody.length));
      return h;
    }

    public String responseUtf8() {
      return new String(responseBody, StandardCharsets.UTF_8);
    }
  }

  /**
   * One scenario.
   *
   * @param context the context leg, null for {@link Order#CARRIED}
   * @param expectedGeneration the generation response as the client must see it
   * @param usage what the client's SDK and the outcome metadata must read; null for a vector derived
   *     from another one with a changed body (fuzz inputs, size limits), of which only bytes are known
   */
  public record Vector(
      String name, Order order, Leg context, Leg generation, byte[] expectedGeneration, ExpectedUsage usage) {
    /** A derived vector whose client-side usage is not stated. */
    public Vector(String name, Order order, Leg context, Leg generation, byte[] expectedGeneration) {
      this(name, order, context, generation, expectedGeneration, null);
    }

    @Override
    public String toString() {
      return name;
    }
  }

  public static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  public static Leg leg(String path, String requestBody, String contentType, String responseBody, String... headers) {
    return legOn(path, null, requestBody, contentType, responseBody, headers);
  }

  public static Leg legOn(
      String path, String cluster, String requestBody, String contentType, String responseBody, String... headers) {
    Map<String, String> h = new LinkedHashMap<>();
    for (int i = 0; i < headers.length; i += 2) {
      h.put(headers[i], headers[i + 1]);
    }
    return new Leg(path, Map.copyOf(h), cluster, utf8(requestBody), contentType, utf8(responseBody));
  }

  public static Vector vector(String name, Order order, Leg ctx, Leg gen, String expected, ExpectedUsage usage) {
    return new Vector(name, order, ctx, gen, utf8(expected), usage);
  }

  /** The usage numbers an OpenAI client reads. */
  public static ClientUsage client(long prompt, Long cached, long completion) {
    return new ClientUsage(prompt, cached, completion, prompt + completion);
  }

  /**
   * TensorRT-LLM's context leg of request {@code TRT_ID}, a JSON answer carrying {@code ctxUsage};
   * {@code extra} adds request members (its {@code schedule_style}).
   */
  private static Leg trtContextLeg(String extra, String ctxUsage) {
    return leg(PATH, trtRequest("context_only", ",\"disagg_request_id\":" + TRT_ID + extra), "application/json",
        Wire.trtContextResponse(TRT_ID, TRT_ID, ctxUsage));
  }

  /**
   * TensorRT-LLM's generation leg of request {@code TRT_ID} (its context named by the same id), answered
   * with {@code responseBody} of {@code contentType}; {@code extra} adds request members.
   */
  private static Leg trtGenerationLeg(String extra, String contentType, String responseBody) {
    return leg(PATH, trtRequest("generation_only", ",\"ctx_request_id\":" + TRT_ID + ",\"disagg_request_id\":" + TRT_ID + extra),
        contentType, responseBody);
  }

  /**
   * A vLLM leg on {@code /v1/responses} over NIXL, joined by {@code x-request-id}: {@code kvTransfer} is
   * {@code do_remote_decode} on the prefill, {@code do_remote_prefill} on the decode; a JSON answer.
   */
  private static Leg vllmResponsesLeg(String kvTransfer, String requestId, String responseBody) {
    return leg("/v1/responses", "{\"model\":\"m\",\"input\":\"hi\",\"kv_transfer_params\":{\"" + kvTransfer + "\":true}}",
        "application/json", responseBody, "x-request-id", requestId);
  }

  /** The golden engine vectors (engines.md): the fuzz seed corpus is generated from this list. */
  public static List<Vector> all() {
    List<Vector> v = new ArrayList<>();
    String json = "application/json";
    String sse = "text/event-stream";

    // G6: trtllm-serve context_first, non-streaming.
    String ctxUsage = "{\"prompt_tokens\":101,\"completion_tokens\":1,\"total_tokens\":102,\"prompt_tokens_details\":{\"cached_tokens\":7}}";
    String genUsage = "{\"prompt_tokens\":101,\"completion_tokens\":13,\"total_tokens\":114,\"prompt_tokens_details\":{\"cached_tokens\":101}}";
    String genBody = Wire.chatCompletion("gen", genUsage);
    v.add(vector("trtContextFirstJson", Order.CONTEXT_FIRST,
        trtContextLeg(",\"schedule_style\":0", ctxUsage),
        trtGenerationLeg(",\"schedule_style\":0", json, genBody),
        genBody.replace("{\"cached_tokens\":101}", "{\"cached_tokens\":7}"),
        ExpectedUsage.corrected(SdkRead.CHAT_COMPLETION, 101, 7, 13, 101, client(101, 7L, 13))));

    // G7: streaming, context_first.
    ctxUsage = "{\"prompt_tokens\":128,\"completion_tokens\":0,\"total_tokens\":128,\"prompt_tokens_details\":{\"cached_tokens\":9}}";
    genUsage = "{\"prompt_tokens\":128,\"completion_tokens\":5,\"total_tokens\":133,\"prompt_tokens_details\":{\"cached_tokens\":128}}";
    String stream = Wire.chatStream(genUsage, "Par", "is", " is", " the", " capital");
    v.add(vector("trtContextFirstStream", Order.CONTEXT_FIRST,
        trtContextLeg("", ctxUsage),
        trtGenerationLeg("", sse, stream),
        stream.replace("{\"cached_tokens\":128}", "{\"cached_tokens\":9}"),
        ExpectedUsage.corrected(SdkRead.CHAT_STREAM, 128, 9, 5, 128, client(128, 9L, 5))));

    // TensorRT-LLM framing: "} \n\n", CRLF, trailing perf-metrics event.
    stream =
        (Wire.chunk("Par").replace("}\n\n", "} \n\n")
                + Wire.chunk("is")
                + Wire.usageChunk(Wire.usage(128, 2, 128L))
                + Wire.DONE
                + "event: trtllm.perf_metrics\ndata: {\"ctx_server\":\"h:1\",\"usage\":\"n/a\"}\n\n")
            .replace("\n", "\r\n");
    v.add(vector("trtFramingCrlfAndPerfMetrics", Order.CONTEXT_FIRST,
        trtContextLeg("", Wire.usage(128, 1, 9L)),
        leg(PATH, trtRequest("generation_only", ",\"ctx_request_id\":" + TRT_ID), "text/event-stream; charset=utf-8", stream),
        stream.replace("{\"cached_tokens\":128}", "{\"cached_tokens\":9}"),
        ExpectedUsage.corrected(SdkRead.CHAT_STREAM, 128, 9, 2, 128, client(128, 9L, 2))));

    // generation_first, streaming.
    ctxUsage = "{\"prompt_tokens\":128,\"completion_tokens\":1,\"total_tokens\":129,\"prompt_tokens_details\":{\"cached_tokens\":9}}";
    stream = Wire.chatStream(genUsage, "Par", "is");
    v.add(vector("trtGenerationFirstStream", Order.GENERATION_FIRST,
        trtContextLeg(",\"schedule_style\":1", ctxUsage),
        trtGenerationLeg(",\"schedule_style\":1", sse, stream),
        stream.replace("{\"cached_tokens\":128}", "{\"cached_tokens\":9}"),
        ExpectedUsage.corrected(SdkRead.CHAT_STREAM, 128, 9, 5, 128, client(128, 9L, 5))));

    // generation_first, non-streaming.
    genBody = Wire.chatCompletion("gen", Wire.usage(101, 13, 101L));
    v.add(vector("trtGenerationFirstJson", Order.GENERATION_FIRST,
        trtContextLeg(",\"schedule_style\":1", Wire.usage(101, 1, 7L)),
        leg(PATH, trtRequest("generation_only", ",\"ctx_request_id\":" + TRT_ID + ",\"schedule_style\":1"), json, genBody),
        genBody.replace(Wire.usage(101, 13, 101L), Wire.usage(101, 13, 7L)),
        ExpectedUsage.corrected(SdkRead.CHAT_COMPLETION, 101, 7, 13, 101, client(101, 7L, 13))));

    // A retried context call: the generation names the attempt that succeeded.
    genBody = Wire.chatCompletion("g", Wire.usage(64, 10, 64L));
    v.add(vector("trtRetriedContextCall", Order.CONTEXT_FIRST,
        leg(PATH, trtRequest("context_only", ",\"disagg_request_id\":" + TRT_RETRY_ID), json,
            Wire.trtContextResponse(TRT_RETRY_ID, TRT_RETRY_ID, Wire.usage(64, 1, 32L))),
        leg(PATH, trtRequest("generation_only", ",\"ctx_request_id\":" + TRT_RETRY_ID + ",\"disagg_request_id\":" + TRT_ID), json, genBody),
        genBody.replace(Wire.usage(64, 10, 64L), Wire.usage(64, 10, 32L)),
        ExpectedUsage.corrected(SdkRead.CHAT_COMPLETION, 64, 32, 10, 64, client(64, 32L, 10))));

    // G8: ctx_usage carried in the generation request.
    stream = Wire.chatStream(Wire.usage(10, 3, 10L), "a", "b");
    v.add(vector("trtCtxUsageCarriedInGenerationRequest", Order.CARRIED, null,
        leg(PATH, trtRequest("generation_only",
                ",\"ctx_request_id\":1,\"ctx_usage\":{\"prompt_tokens\":10,\"completion_tokens\":0,\"total_tokens\":10,\"prompt_tokens_details\":{\"cached_tokens\":4}}"),
            sse, stream),
        stream.replace("{\"cached_tokens\":10}", "{\"cached_tokens\":4}"),
        ExpectedUsage.corrected(SdkRead.CHAT_STREAM, 10, 4, 3, 10, client(10, 4L, 3))));

    // G9a: vLLM toy proxy.
    genBody = Wire.chatCompletion("r-9", Wire.usage(999, 8, 999L));
    v.add(vector("vllmProxyJson", Order.CONTEXT_FIRST,
        leg(PATH, vllmPrefill(), json, Wire.chatCompletion("r-9", Wire.usage(186, 1, 64L)), "x-request-id", "r-9"),
        leg(PATH, vllmDecode(false), json, genBody, "x-request-id", "r-9"),
        genBody.replace(Wire.usage(999, 8, 999L),
            "{\"prompt_tokens\":186,\"completion_tokens\":8,\"total_tokens\":194,\"prompt_tokens_details\":{\"cached_tokens\":64}}"),
        ExpectedUsage.corrected(SdkRead.CHAT_COMPLETION, 186, 64, 8, 999, client(186, 64L, 8))));

    // vLLM continuous usage.
    StringBuilder continuous = new StringBuilder();
    for (int i = 1; i <= 4; i++) {
      continuous.append(
          "data: {\"id\":\"chatcmpl-r\",\"object\":\"chat.completion.chunk\",\"created\":1764400000,\"model\":\"" + Wire.MODEL
              + "\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"t" + i + "\"},\"logprobs\":null,\"finish_reason\":null}],"
              + "\"usage\":{\"prompt_tokens\":1656,\"total_tokens\":" + (1656 + i) + ",\"completion_tokens\":" + i
              + ",\"prompt_tokens_details\":{\"cached_tokens\":1655}}}\n\n");
    }
    continuous.append(Wire.usageChunk(Wire.usage(1656, 4, 1655L))).append(Wire.DONE);
    v.add(vector("vllmContinuousUsageStream", Order.CONTEXT_FIRST,
        leg(PATH, vllmPrefill(), json, Wire.chatCompletion("r", Wire.usage(1656, 1, 1024L)), "x-request-id", "r-c"),
        leg(PATH, vllmDecode(true), sse, continuous.toString(), "x-request-id", "r-c"),
        continuous.toString().replace("{\"cached_tokens\":1655}", "{\"cached_tokens\":1024}"),
        // Every chunk's usage is corrected, the final usage-only one included.
        ExpectedUsage.corrected(SdkRead.CHAT_STREAM, 1656, 1024, 4, 1655, client(1656, 1024L, 1), client(1656, 1024L, 2),
            client(1656, 1024L, 3), client(1656, 1024L, 4), client(1656, 1024L, 4))));

    // G11: llm-d sidecar legs.
    stream = Wire.chatStream("{\"prompt_tokens\":64,\"completion_tokens\":2,\"total_tokens\":66,\"prompt_tokens_details\":{\"cached_tokens\":49}}", "x");
    v.add(vector("llmdSidecarStream", Order.CONTEXT_FIRST,
        leg(PATH, vllmPrefill(), json, Wire.chatCompletion("u", Wire.usage(64, 1, 8L)), "x-request-id", "uuid-7"),
        leg(PATH, vllmDecode(true), sse, stream, "x-request-id", "uuid-7"),
        stream.replace("{\"cached_tokens\":49}", "{\"cached_tokens\":8}"),
        ExpectedUsage.corrected(SdkRead.CHAT_STREAM, 64, 8, 2, 49, client(64, 8L, 2))));

    // G10 / G9c: sibling detail keys, null details, context without details.
    String siblings =
        "{\"prompt_tokens\":100,\"completion_tokens\":20,\"total_tokens\":120,\"prompt_tokens_details\":{\"cached_tokens\":100,\"audio_tokens\":2},\"future_field\":7}";
    String nullDetails = "{\"prompt_tokens\":100,\"completion_tokens\":20,\"total_tokens\":120,\"prompt_tokens_details\":null}";
    String g9c = "{\"prompt_tokens\":10,\"completion_tokens\":2,\"total_tokens\":12,\"prompt_tokens_details\":{\"cached_tokens\":10}}";
    String[][] cases = {
      {"s", Wire.usage(100, 1, 64L), siblings,
          "{\"prompt_tokens\":100,\"completion_tokens\":20,\"total_tokens\":120,\"prompt_tokens_details\":{\"cached_tokens\":64,\"audio_tokens\":2},\"future_field\":7}"},
      {"n", Wire.usage(100, 1, 0L), nullDetails,
          "{\"prompt_tokens\":100,\"completion_tokens\":20,\"total_tokens\":120,\"prompt_tokens_details\":{\"cached_tokens\":0}}"},
      {"c", Wire.usage(10, 1, null), g9c,
          "{\"prompt_tokens\":10,\"completion_tokens\":2,\"total_tokens\":12,\"prompt_tokens_details\":{\"cached_tokens\":0}}"},
    };
    Map<String, ExpectedUsage> routerUsage = Map.of(
        "s", ExpectedUsage.corrected(SdkRead.CHAT_COMPLETION, 100, 64, 20, 100, client(100, 64L, 20)),
        // Null details: the worker reported no cached count at all.
        "n", new ExpectedUsage(SdkRead.CHAT_COMPLETION, List.of(client(100, 0L, 20)), 100, 0, 20, null, true),
        "c", ExpectedUsage.corrected(SdkRead.CHAT_COMPLETION, 10, 0, 2, 10, client(10, 0L, 2)));
    for (String[] c : cases) {
      String body = Wire.chatCompletion(c[0], c[2]);
      v.add(vector("vllmRouter-" + c[0], Order.CONTEXT_FIRST,
          leg(PATH, vllmPrefill(), json, Wire.chatCompletion(c[0], c[1]), "x-request-id", "router-" + c[0]),
          leg(PATH, vllmDecode(false), json, body, "x-request-id", "router-" + c[0]),
          body.replace(c[2], c[3]), routerUsage.get(c[0])));
    }

    // SGLang: identical bodies, told apart by cluster; dispatched together (generation first).
    String sgl =
        "{\"model\":\"" + Wire.MODEL + "\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stream\":true,"
            + "\"stream_options\":{\"include_usage\":true},\"bootstrap_host\":\"10.1.0.5\",\"bootstrap_port\":8998,"
            + "\"bootstrap_room\":9223372036854775806}";
    String genStream = Wire.chatStream(Wire.usage(300, 20, 300L), "H", "ello");
    v.add(sglangPair("sglangIdenticalBodiesByCluster", Order.GENERATION_FIRST, sgl,
        Wire.chatStream(Wire.usage(300, 1, 256L), "H"), genStream, 256, 20));

    // G9b: the Responses API, JSON and stream.
    String respGen = "{\"input_tokens\":98,\"output_tokens\":8,\"total_tokens\":106,\"input_tokens_details\":{\"cached_tokens\":98},\"output_tokens_details\":{\"reasoning_tokens\":3}}";
    String respCtx = "{\"input_tokens\":98,\"output_tokens\":1,\"total_tokens\":99,\"input_tokens_details\":{\"cached_tokens\":32},\"output_tokens_details\":{\"reasoning_tokens\":0}}";
    String resp = Wire.response(respGen);
    v.add(vector("responsesApiJson", Order.CONTEXT_FIRST,
        vllmResponsesLeg("do_remote_decode", "resp-1", Wire.response(respCtx)),
        vllmResponsesLeg("do_remote_prefill", "resp-1", resp),
        resp.replace("{\"cached_tokens\":98}", "{\"cached_tokens\":32}"),
        ExpectedUsage.corrected(SdkRead.RESPONSE, 98, 32, 8, 98, client(98, 32L, 8))));
    stream = Wire.responseStream(respGen);
    v.add(vector("responsesApiStream", Order.CONTEXT_FIRST,
        leg("/v1/responses", "{\"model\":\"m\",\"input\":\"hi\"}", json, Wire.response(respCtx),
            "x-disagg-phase", "prefill", "x-disagg-request-id", "resp-2"),
        leg("/v1/responses", "{\"model\":\"m\",\"input\":\"hi\",\"stream\":true}", sse, stream,
            "x-disagg-phase", "decode", "x-disagg-request-id", "resp-2"),
        stream.replace("{\"cached_tokens\":98}", "{\"cached_tokens\":32}"),
        ExpectedUsage.corrected(SdkRead.RESPONSE_STREAM, 98, 32, 8, 98, client(98, 32L, 8))));

    // Legacy /v1/completions: a context worker without details means zero cached.
    String completion = Wire.completion(Wire.usage(17, 16, 17L));
    v.add(vector("legacyCompletions", Order.CONTEXT_FIRST,
        leg("/v1/completions", "{\"model\":\"m\",\"prompt\":\"x\",\"kv_transfer_params\":{\"do_remote_decode\":true}}", json,
            Wire.completion(Wire.usage(17, 1, null)), "x-request-id", "c-1"),
        leg("/v1/completions", "{\"model\":\"m\",\"prompt\":\"x\",\"kv_transfer_params\":{\"do_remote_prefill\":true}}", json, completion,
            "x-request-id", "c-1"),
        completion.replace(Wire.usage(17, 16, 17L), Wire.usage(17, 16, 0L)),
        ExpectedUsage.corrected(SdkRead.COMPLETION, 17, 0, 16, 17, client(17, 0L, 16))));
    return List.copyOf(v);
  }

  /**
   * The Anthropic Messages vectors: vLLM's {@code /v1/messages} with the
   * decode worker reporting the transferred prompt as a cache read. Kept apart from {@link #all} so the
   * committed fuzz seed corpus, generated from that list, stays as it is.
   */
  public static List<Vector> messages() {
    String json = "application/json";
    String sse = "text/event-stream";
    String path = EngineRequests.MESSAGES_PATH;
    String start = Wire.messagesUsage(186, 0, null, null);
    String startFixed =
        "{\"input_tokens\":122,\"output_tokens\":0,\"cache_read_input_tokens\":64,\"cache_creation_input_tokens\":0}";
    String gen = Wire.messagesUsage(0, 8, 0L, 186L);
    String fixed = Wire.messagesUsage(122, 8, 0L, 64L);
    String body = Wire.message(gen);
    String stream = Wire.messageStream(start, gen, "Par", "is", ".");
    String expectedStream = stream.replace(start, startFixed).replace(gen, fixed);
    // The SDK reads the prefill worker's split: 122 uncached, 64 read from the cache, none created.
    MessagesUsage messagesUsage = new MessagesUsage(122, 64L, 0L, 8);
    return List.of(
        vector("messagesJsonContextOnChat", Order.CONTEXT_FIRST,
            leg("/v1/chat/completions", EngineRequests.messagesRequest(true, false), json,
                Wire.chatCompletion("p", Wire.usage(186, 1, 64L)), "x-request-id", "m-1"),
            leg(path, EngineRequests.messagesRequest(false, false), json, body, "x-request-id", "m-1"),
            Wire.message(fixed), ExpectedUsage.corrected(SdkRead.MESSAGE, 186, 64, 8, 186, messagesUsage)),
        vector("messagesStreamContextOnMessages", Order.CONTEXT_FIRST,
            leg(path, EngineRequests.messagesRequest(true, false), json, Wire.prefillMessage(Wire.messagesUsage(122, 1, 0L, 64L)),
                "x-request-id", "m-2"),
            leg(path, EngineRequests.messagesRequest(false, true), sse, stream, "x-request-id", "m-2"),
            expectedStream, ExpectedUsage.corrected(SdkRead.MESSAGE_STREAM, 186, 64, 8, 186, messagesUsage)),
        vector("messagesStreamConcurrentContextStream", Order.GENERATION_FIRST,
            leg(path, EngineRequests.messagesRequest(true, true), sse,
                Wire.messageStream(start, Wire.messagesUsage(122, 1, 0L, 64L), "Paris"),
                "x-request-id", "m-3", "x-disagg-order", "concurrent"),
            leg(path, EngineRequests.messagesRequest(false, true), sse, stream, "x-request-id", "m-3", "x-disagg-order", "concurrent"),
            expectedStream, ExpectedUsage.corrected(SdkRead.MESSAGE_STREAM, 186, 64, 8, 186, messagesUsage)));
  }

  /**
   * The engine-family flows beyond the golden vectors of {@link #all} and {@link #messages}: responses
   * that are already right (passed byte for byte), vllm-ascend's recompute pairs, detail keys in streams,
   * SGLang's batches and early prefills, and more Anthropic Messages orders. Kept apart from {@link #all}
   * so the committed fuzz seed corpus stays as it is.
   */
  public static List<Vector> variants() {
    List<Vector> v = new ArrayList<>();
    String json = "application/json";
    String sse = "text/event-stream";

    // vLLM >= 0.31 forwards the prefill's count in kv_transfer_params: the decode already reports it.
    String stream = Wire.chatStream(Wire.usage(1656, 4, 1024L), "t1", "t2");
    v.add(vector("vllmAlreadyForwardsThePrefillCount", Order.CONTEXT_FIRST,
        leg(PATH, vllmPrefill(), json, Wire.chatCompletion("r", Wire.usage(1656, 1, 1024L)), "x-request-id", "fixed-1"),
        leg(PATH, decodeForwardingPrefillCount(1024), sse, stream, "x-request-id", "fixed-1"),
        stream, ExpectedUsage.alreadyRight(SdkRead.CHAT_STREAM, 1656, 1024, 4, client(1656, 1024L, 4))));

    // TensorRT-LLM carrying ctx_usage to a generation worker that already reports it right.
    String body = Wire.chatCompletion("g", Wire.usage(10, 7, 4L));
    v.add(vector("trtCtxUsageCarriedAndAlreadyRight", Order.CARRIED, null,
        leg(PATH, trtRequest("generation_only", ",\"ctx_request_id\":1,\"disagg_request_id\":1,\"ctx_usage\":" + Wire.usage(10, 0, 4L)),
            json, body),
        body, ExpectedUsage.alreadyRight(SdkRead.CHAT_COMPLETION, 10, 4, 7, client(10, 4L, 7))));

    // A TensorRT-LLM generation worker that already reports the context worker's count.
    body = Wire.chatCompletion("g", Wire.usage(101, 13, 7L));
    v.add(vector("trtAlreadyRightAfterTheContextLeg", Order.CONTEXT_FIRST,
        leg(PATH, "{\"disaggregated_params\":{\"request_type\":\"context_only\",\"disagg_request_id\":5}}", json,
            Wire.trtContextResponse("5", "5", Wire.usage(101, 1, 7L))),
        leg(PATH, "{\"disaggregated_params\":{\"request_type\":\"generation_only\",\"ctx_request_id\":5}}", json, body),
        body, ExpectedUsage.alreadyRight(SdkRead.CHAT_COMPLETION, 101, 7, 13, client(101, 7L, 13))));

    // vllm-ascend's recompute scheduler: the first decode ends with stop_reason "recomputed", the proxy
    // runs a new P/D pair under a new X-Request-Id; each decode is corrected by its own prefill.
    String usageChunkStart = "}]}\n\ndata: {\"id\":\"chatcmpl-g\",\"object\":\"chat.completion.chunk\",\"created\":1764400000,"
        + "\"model\":\"" + Wire.MODEL + "\",\"choices\":[]";
    String first = Wire.chatStream(Wire.usage(500, 40, 500L), "a", "b").replace(
        "\"finish_reason\":null" + usageChunkStart, "\"finish_reason\":\"stop\",\"stop_reason\":\"recomputed\"" + usageChunkStart);
    v.add(vector("ascendRecomputeFirstPair", Order.CONTEXT_FIRST,
        leg(PATH, vllmPrefill(), json, Wire.chatCompletion("p1", Wire.usage(500, 1, 0L)), "x-request-id", "uuid-a"),
        leg(PATH, vllmDecode(true), sse, first, "x-request-id", "uuid-a"),
        first.replace("{\"cached_tokens\":500}", "{\"cached_tokens\":0}"),
        ExpectedUsage.corrected(SdkRead.CHAT_STREAM, 500, 0, 40, 500, client(500, 0L, 40))));
    String second = Wire.chatStream(Wire.usage(540, 60, 540L), "c");
    v.add(vector("ascendRecomputeSecondPair", Order.CONTEXT_FIRST,
        leg(PATH, vllmPrefill(), json, Wire.chatCompletion("p2", Wire.usage(540, 1, 496L)), "x-request-id", "uuid-b"),
        leg(PATH, vllmDecode(true), sse, second, "x-request-id", "uuid-b"),
        second.replace("{\"cached_tokens\":540}", "{\"cached_tokens\":496}"),
        ExpectedUsage.corrected(SdkRead.CHAT_STREAM, 540, 496, 60, 540, client(540, 496L, 60))));

    // prompt_tokens_details null, and unknown detail keys, in a stream's usage events.
    String nullDetails = "{\"prompt_tokens\":100,\"completion_tokens\":20,\"total_tokens\":120,\"prompt_tokens_details\":null}";
    String extras = "{\"prompt_tokens\":100,\"completion_tokens\":21,\"total_tokens\":121,"
        + "\"prompt_tokens_details\":{\"audio_tokens\":2,\"cached_tokens\":100,\"image_tokens\":9},\"completion_tokens_details\":{\"reasoning_tokens\":5}}";
    stream = Wire.chunk("x") + Wire.usageChunk(nullDetails).replace("\"choices\":[]", "\"choices\":[{\"index\":0,\"delta\":{}}]")
        + Wire.usageChunk(extras) + Wire.DONE;
    v.add(vector("vllmNullAndExtraDetailKeysInAStream", Order.CONTEXT_FIRST,
        leg(PATH, vllmPrefill(), json, Wire.chatCompletion("d", Wire.usage(100, 1, 64L)), "x-request-id", "details"),
        leg(PATH, vllmDecode(true), sse, stream, "x-request-id", "details"),
        stream.replace("\"prompt_tokens_details\":null", "\"prompt_tokens_details\":{\"cached_tokens\":64}")
            .replace("\"cached_tokens\":100,", "\"cached_tokens\":64,"),
        ExpectedUsage.corrected(SdkRead.CHAT_STREAM, 100, 64, 21, 100, client(100, 64L, 20), client(100, 64L, 21))));

    // vLLM 0.32 on CPU (real-components.md): the prefill's JSON usage states created_cache_tokens and a
    // null multimodal_tokens; the decode's SSE usage has no multimodal_tokens and created_cache_tokens 0.
    String prefill032 = "{\"prompt_tokens\":310,\"total_tokens\":311,\"completion_tokens\":1,"
        + "\"prompt_tokens_details\":{\"cached_tokens\":0,\"created_cache_tokens\":256,\"multimodal_tokens\":null}}";
    String decode032 = "{\"prompt_tokens\":310,\"total_tokens\":318,\"completion_tokens\":8,"
        + "\"prompt_tokens_details\":{\"cached_tokens\":%s,\"created_cache_tokens\":0}}";
    String fixed032 = String.format(decode032, "0").replace("\"created_cache_tokens\":0", "\"created_cache_tokens\":256");
    // Forwarded params: cached_tokens already right, created_cache_tokens not; no null key added.
    stream = Wire.chatStream(String.format(decode032, "0"), "t1", "t2");
    v.add(vector("vllm032CreatedCacheTokensFromThePrefill", Order.CONTEXT_FIRST,
        leg(PATH, vllmPrefill(), json, Wire.chatCompletion("v32a", prefill032), "x-request-id", "v32-a"),
        leg(PATH, decodeForwardingPrefillCount(0), sse, stream, "x-request-id", "v32-a"),
        stream.replace(String.format(decode032, "0"), fixed032),
        ExpectedUsage.corrected(SdkRead.CHAT_STREAM, 310, 0, 8, 0, client(310, 0L, 8))));
    // A client's kv_transfer_params merged by the router: the decode reports what it was told.
    for (String forged : new String[] {"-5", "9999"}) {
      String usage = String.format(decode032, forged);
      stream = Wire.chatStream(usage, "t1");
      v.add(vector("vllm032ForgedCachedTokens" + forged + "Stream", Order.CONTEXT_FIRST,
          leg(PATH, vllmPrefill(), json, Wire.chatCompletion("v32f", prefill032), "x-request-id", "v32-f" + forged),
          leg(PATH, decodeForwardingPrefillCount(Long.parseLong(forged)), sse, stream, "x-request-id", "v32-f" + forged),
          stream.replace(usage, fixed032),
          ExpectedUsage.corrected(SdkRead.CHAT_STREAM, 310, 0, 8, Long.parseLong(forged), client(310, 0L, 8)).impossible()));
    }
    String jsonUsage = String.format(decode032, "-5").replace("}}", ",\"multimodal_tokens\":null}}");
    body = Wire.chatCompletion("v32j", jsonUsage);
    v.add(vector("vllm032ForgedNegativeCachedJson", Order.CONTEXT_FIRST,
        leg(PATH, vllmPrefill(), json, Wire.chatCompletion("v32j", prefill032), "x-request-id", "v32-j"),
        leg(PATH, decodeForwardingPrefillCount(-5), json, body, "x-request-id", "v32-j"),
        body.replace(jsonUsage, fixed032.replace("}}", ",\"multimodal_tokens\":null}}")),
        ExpectedUsage.corrected(SdkRead.CHAT_COMPLETION, 310, 0, 8, -5, client(310, 0L, 8)).impossible()));
    // Counts no engine could mean, and none the context leg can replace: clamped.
    String odd = "{\"prompt_tokens\":101,\"completion_tokens\":13.7,\"total_tokens\":\"x\","
        + "\"prompt_tokens_details\":{\"cached_tokens\":101},\"completion_tokens_details\":{\"reasoning_tokens\":-2}}";
    body = Wire.chatCompletion("odd", odd);
    v.add(vector("fractionalAndNonNumericGenerationCounts", Order.CONTEXT_FIRST,
        leg(PATH, vllmPrefill(), json, Wire.chatCompletion("odd", Wire.usage(101, 1, 7L)), "x-request-id", "odd"),
        leg(PATH, vllmDecode(false), json, body, "x-request-id", "odd"),
        body.replace(odd, "{\"prompt_tokens\":101,\"completion_tokens\":13,\"total_tokens\":114,"
            + "\"prompt_tokens_details\":{\"cached_tokens\":7},\"completion_tokens_details\":{\"reasoning_tokens\":0}}"),
        ExpectedUsage.corrected(SdkRead.CHAT_COMPLETION, 101, 7, 13, 101, client(101, 7L, 13)).impossible()));
    // vLLM's usage split over two events: the last content event without details, then the details.
    String partial = "{\"prompt_tokens\":310,\"completion_tokens\":8,\"total_tokens\":318}";
    String full = String.format(decode032, "310");
    stream = Wire.chunk("t1") + Wire.usageChunk(partial).replace("\"choices\":[]",
        "\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]") + Wire.usageChunk(full) + Wire.DONE;
    v.add(vector("vllmUsageSplitOverTwoEvents", Order.CONTEXT_FIRST,
        leg(PATH, vllmPrefill(), json, Wire.chatCompletion("split", prefill032), "x-request-id", "split"),
        leg(PATH, vllmDecode(true), sse, stream, "x-request-id", "split"),
        stream.replace(full, fixed032),
        ExpectedUsage.corrected(SdkRead.CHAT_STREAM, 310, 0, 8, 310, client(310, null, 8), client(310, 0L, 8))));
    // Responses API cache writes (vLLM #57222): a prompt-side detail, the prefill's.
    String respCtx = "{\"input_tokens\":98,\"output_tokens\":1,\"total_tokens\":99,"
        + "\"input_tokens_details\":{\"cached_tokens\":32,\"cache_write_tokens\":66}}";
    String respGen = "{\"input_tokens\":98,\"output_tokens\":8,\"total_tokens\":106,"
        + "\"input_tokens_details\":{\"cached_tokens\":98,\"cache_write_tokens\":0},\"output_tokens_details\":{\"reasoning_tokens\":3}}";
    body = Wire.response(respGen);
    v.add(vector("responsesCacheWriteTokensFromThePrefill", Order.CONTEXT_FIRST,
        vllmResponsesLeg("do_remote_decode", "resp-w", Wire.response(respCtx)),
        vllmResponsesLeg("do_remote_prefill", "resp-w", body),
        body.replace("{\"cached_tokens\":98,\"cache_write_tokens\":0}", "{\"cached_tokens\":32,\"cache_write_tokens\":66}"),
        ExpectedUsage.corrected(SdkRead.RESPONSE, 98, 32, 8, 98, client(98, 32L, 8))));

    // SGLang n>1 and batches: arrays of rooms (and hosts), joined on the whole array.
    String rooms = "[9223372036854775806,4611686018427387904]";
    for (String[] hosts : new String[][] {{"host", "\"10.1.0.5\""}, {"hosts", "[\"10.1.0.5\",\"10.1.0.6\"]"}}) {
      String request = sglangRequest(rooms, hosts[1], 2);
      String gen = sglangTwoChoiceStream(Wire.usage(300, 40, 300L));
      v.add(sglangPair("sglangTwoRoomsOne" + hosts[0].substring(0, 1).toUpperCase(Locale.ROOT) + hosts[0].substring(1),
          Order.GENERATION_FIRST, request, sglangTwoChoiceStream(Wire.usage(300, 2, 256L)), gen, 256, 40));
    }
    // SGLang's default order is concurrent, yet a prefill that happens to finish first works too.
    String request = sglangRequest("9223372036854775806", "\"10.1.0.5\"", 1);
    String gen = Wire.chatStream(Wire.usage(300, 20, 300L), "H", "ello");
    v.add(sglangPair("sglangPrefillFinishingFirst", Order.CONTEXT_FIRST, request,
        Wire.chatStream(Wire.usage(300, 1, 128L), "H"), gen, 128, 20));

    // Anthropic Messages, concurrent JSON: the decode's body ends before the prefill on chat completions.
    String path = EngineRequests.MESSAGES_PATH;
    v.add(vector("messagesJsonConcurrent", Order.GENERATION_FIRST,
        leg("/v1/chat/completions", EngineRequests.messagesRequest(true, false), json,
            Wire.chatCompletion("p", Wire.usage(186, 1, 64L)), "x-request-id", "m-4", "x-disagg-order", "concurrent"),
        leg(path, EngineRequests.messagesRequest(false, false), json, Wire.message(Wire.messagesUsage(0, 8, 0L, 186L)),
            "x-request-id", "m-4", "x-disagg-order", "concurrent"),
        Wire.message(Wire.messagesUsage(122, 8, 0L, 64L)),
        ExpectedUsage.corrected(SdkRead.MESSAGE, 186, 64, 8, 186, new MessagesUsage(122, 64L, 0L, 8))));
    // vLLM before it reported cache counts: input_tokens is the whole prompt on both legs. Already right.
    body = Wire.message(Wire.messagesUsage(186, 8, null, null));
    v.add(vector("messagesOlderVllmWithoutCacheCounts", Order.CONTEXT_FIRST,
        leg(path, EngineRequests.messagesRequest(true, false), json, Wire.prefillMessage(Wire.messagesUsage(186, 1, null, null)),
            "x-request-id", "m-5"),
        leg(path, EngineRequests.messagesRequest(false, false), json, body, "x-request-id", "m-5"),
        body, new ExpectedUsage(SdkRead.MESSAGE, List.of(new MessagesUsage(186, null, null, 8)), 186, 0, 8, null, false)));
    return List.copyOf(v);
  }

  /** Every vector the exchange specification runs: {@link #all} and the vectors derived from or kept beside it. */
  public static List<Vector> specification() {
    List<Vector> v = new ArrayList<>(all());
    v.add(trtResponsesHandoff());
    v.addAll(trtMsgpack());
    v.addAll(messages());
    v.addAll(variants());
    return List.copyOf(v);
  }

  /** A decode request as vLLM >= 0.31's proxies forward it: the prefill's params verbatim, count included. */
  static String decodeForwardingPrefillCount(long prefillCached) {
    return "{\"model\":\"" + Wire.MODEL + "\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stream\":true"
        + ",\"stream_options\":{\"include_usage\":true}"
        + ",\"kv_transfer_params\":{\"do_remote_prefill\":true,\"do_remote_decode\":false,\"remote_block_ids\":[1,2],"
        + "\"remote_engine_id\":\"e\",\"remote_host\":\"10.0.0.2\",\"remote_port\":5600,\"remote_prefill_cached_tokens\":"
        + prefillCached + "}}";
  }

  /** An SGLang request: both legs send it alike, with the bootstrap room(s) and host(s). */
  public static String sglangRequest(String rooms, String hosts, int n) {
    return "{\"model\":\"" + Wire.MODEL + "\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"n\":" + n
        + ",\"stream\":true,\"stream_options\":{\"include_usage\":true},\"bootstrap_host\":" + hosts
        + ",\"bootstrap_port\":8998,\"bootstrap_room\":" + rooms + "}";
  }

  /**
   * An SGLang pair: the same request on the context and the generation cluster, a 300-token prompt the
   * generation stream reports all cached and its context stream {@code cached} of.
   */
  static Vector sglangPair(String name, Order order, String request, String contextStream, String generationStream,
      long cached, long completion) {
    String sse = "text/event-stream";
    return vector(name, order,
        legOn(PATH, EngineRequests.CONTEXT_CLUSTER, request, sse, contextStream),
        legOn(PATH, EngineRequests.GENERATION_CLUSTER, request, sse, generationStream),
        generationStream.replace("{\"cached_tokens\":300}", "{\"cached_tokens\":" + cached + "}"),
        ExpectedUsage.corrected(SdkRead.CHAT_STREAM, 300, cached, completion, 300, client(300, cached, completion)));
  }

  /** An n=2 stream: content for both choices, then the usage of the whole request. */
  public static String sglangTwoChoiceStream(String usage) {
    return Wire.chunk("Hel") + Wire.chunk("Bon").replace("\"index\":0", "\"index\":1") + Wire.usageChunk(usage) + Wire.DONE;
  }

  /** The context worker's own request id, which differs from the orchestrator's disagg_request_id. */
  public static final String TRT_CTX_WORKER_ID = "2748779069441230001";

  /**
   * TensorRT-LLM's Responses API hand-off: the context response has no {@code choices}, so its
   * {@code disaggregated_params} sit at the top level. The generation request names the context
   * worker's {@code ctx_request_id} (and, as after a retried context call, another
   * {@code disagg_request_id}), so only the id read from the context response can join the two.
   */
  public static Vector trtResponsesHandoff() {
    String respGen = "{\"input_tokens\":98,\"output_tokens\":8,\"total_tokens\":106,\"input_tokens_details\":{\"cached_tokens\":98},\"output_tokens_details\":{\"reasoning_tokens\":3}}";
    String respCtx = "{\"input_tokens\":98,\"output_tokens\":1,\"total_tokens\":99,\"input_tokens_details\":{\"cached_tokens\":32},\"output_tokens_details\":{\"reasoning_tokens\":0}}";
    String request = "{\"model\":\"" + Wire.MODEL + "\",\"input\":\"capital of France?\",\"max_output_tokens\":32,\"store\":false";
    String ctxResponse =
        "{\"id\":\"resp_ctx\",\"object\":\"response\",\"created_at\":1764400000,\"status\":\"incomplete\",\"model\":\""
            + Wire.MODEL + "\",\"output\":[],\"finish_reason\":\"length\",\"prompt_token_ids\":[1,2,3],\"usage\":" + respCtx
            + ",\"disaggregated_params\":{\"request_type\":\"context_only\",\"first_gen_tokens\":[12366],\"ctx_request_id\":"
            + TRT_CTX_WORKER_ID + ",\"disagg_request_id\":" + TRT_ID + ",\"encoded_opaque_state\":\"b3BhcXVl\"}}";
    String stream = Wire.responseStream(respGen);
    return vector("trtResponsesHandoff", Order.CONTEXT_FIRST,
        leg("/v1/responses", request + ",\"disaggregated_params\":{\"request_type\":\"context_only\",\"disagg_request_id\":" + TRT_ID
            + ",\"schedule_style\":0}}", "application/json", ctxResponse),
        leg("/v1/responses", request + ",\"stream\":true,\"prompt_token_ids\":[1,2,3],\"disaggregated_params\":{\"request_type\":"
            + "\"generation_only\",\"first_gen_tokens\":[12366],\"ctx_request_id\":" + TRT_CTX_WORKER_ID + ",\"disagg_request_id\":"
            + TRT_RETRY_ID + ",\"encoded_opaque_state\":\"b3BhcXVl\",\"schedule_style\":0}}", "text/event-stream", stream),
        stream.replace("{\"cached_tokens\":98}", "{\"cached_tokens\":32}"),
        ExpectedUsage.corrected(SdkRead.RESPONSE_STREAM, 98, 32, 8, 98, client(98, 32L, 8)));
  }

  /**
   * The TensorRT-LLM vectors (and {@link #trtResponsesHandoff}) as an orchestrator since PR #16873
   * sends them: every request body in MessagePack, announced by {@code X-TRTLLM-Msgpack: 1} while the
   * content type stays {@code application/json}. The header spellings of the vectors take turns, so
   * together they use every header format.
   */
  public static List<Vector> trtMsgpack() {
    List<Vector> trt = new ArrayList<>();
    for (Vector v : all()) {
      if (v.name().startsWith("trt")) {
        trt.add(v);
      }
    }
    trt.add(trtResponsesHandoff());
    List<Vector> out = new ArrayList<>();
    for (int i = 0; i < trt.size(); i++) {
      Vector v = trt.get(i);
      MsgpackBodies.Style style = MsgpackBodies.Style.values()[i % MsgpackBodies.Style.values().length];
      out.add(new Vector(v.name() + "-msgpack-" + style.name().toLowerCase(Locale.ROOT), v.order(),
          msgpack(v.context(), style), msgpack(v.generation(), style), v.expectedGeneration(), v.usage()));
    }
    return List.copyOf(out);
  }

  /** The leg with its request body in MessagePack, as TensorRT-LLM's orchestrator sends it. */
  public static Leg msgpack(Leg leg, MsgpackBodies.Style style) {
    if (leg == null) {
      return null;
    }
    Map<String, String> headers = new LinkedHashMap<>(leg.requestHeaders());
    headers.put("X-TRTLLM-Msgpack", "1"); // as TensorRT-LLM spells it; header names are case-insensitive
    return new Leg(leg.path(), Map.copyOf(headers), leg.cluster(), MsgpackBodies.fromJson(leg.requestBody(), style),
        leg.contentType(), leg.responseBody());
  }
}
