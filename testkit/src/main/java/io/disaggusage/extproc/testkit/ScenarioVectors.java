package io.disaggusage.extproc.testkit;

import static io.disaggusage.extproc.testkit.EngineRequests.PATH;
import static io.disaggusage.extproc.testkit.EngineRequests.TRT_ID;
import static io.disaggusage.extproc.testkit.EngineRequests.TRT_RETRY_ID;
import static io.disaggusage.extproc.testkit.EngineRequests.trtRequest;
import static io.disaggusage.extproc.testkit.EngineRequests.vllmDecode;
import static io.disaggusage.extproc.testkit.EngineRequests.vllmPrefill;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The engine vectors of {@link EngineScenarioTest} as data: each scenario's context and generation
 * exchanges, the order the orchestrator runs them in, and the exact bytes the client must get from
 * the generation worker. The property tests (chunk invariance), the fuzz corpus seeds and the soak
 * test run on this table; {@code EngineScenarioTest} asserts the same vectors through gRPC and the
 * fake Envoy.
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
   */
  public record Vector(String name, Order order, Leg context, Leg generation, byte[] expectedGeneration) {
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

  public static Vector vector(String name, Order order, Leg ctx, Leg gen, String expected) {
    return new Vector(name, order, ctx, gen, utf8(expected));
  }

  /** Every scenario stream of {@link EngineScenarioTest}. */
  public static List<Vector> all() {
    List<Vector> v = new ArrayList<>();
    String json = "application/json";
    String sse = "text/event-stream";

    // G6: trtllm-serve context_first, non-streaming.
    String ctxUsage = "{\"prompt_tokens\":101,\"completion_tokens\":1,\"total_tokens\":102,\"prompt_tokens_details\":{\"cached_tokens\":7}}";
    String genUsage = "{\"prompt_tokens\":101,\"completion_tokens\":13,\"total_tokens\":114,\"prompt_tokens_details\":{\"cached_tokens\":101}}";
    String genBody = Wire.chatCompletion("gen", genUsage);
    v.add(vector("trtContextFirstJson", Order.CONTEXT_FIRST,
        leg(PATH, trtRequest("context_only", ",\"disagg_request_id\":" + TRT_ID + ",\"schedule_style\":0"), json,
            Wire.trtContextResponse(TRT_ID, TRT_ID, ctxUsage)),
        leg(PATH, trtRequest("generation_only", ",\"ctx_request_id\":" + TRT_ID + ",\"disagg_request_id\":" + TRT_ID + ",\"schedule_style\":0"),
            json, genBody),
        genBody.replace("{\"cached_tokens\":101}", "{\"cached_tokens\":7}")));

    // G7: streaming, context_first.
    ctxUsage = "{\"prompt_tokens\":128,\"completion_tokens\":0,\"total_tokens\":128,\"prompt_tokens_details\":{\"cached_tokens\":9}}";
    genUsage = "{\"prompt_tokens\":128,\"completion_tokens\":5,\"total_tokens\":133,\"prompt_tokens_details\":{\"cached_tokens\":128}}";
    String stream = Wire.chatStream(genUsage, "Par", "is", " is", " the", " capital");
    v.add(vector("trtContextFirstStream", Order.CONTEXT_FIRST,
        leg(PATH, trtRequest("context_only", ",\"disagg_request_id\":" + TRT_ID), json, Wire.trtContextResponse(TRT_ID, TRT_ID, ctxUsage)),
        leg(PATH, trtRequest("generation_only", ",\"ctx_request_id\":" + TRT_ID + ",\"disagg_request_id\":" + TRT_ID), sse, stream),
        stream.replace("{\"cached_tokens\":128}", "{\"cached_tokens\":9}")));

    // TensorRT-LLM framing: "} \n\n", CRLF, trailing perf-metrics event.
    stream =
        (Wire.chunk("Par").replace("}\n\n", "} \n\n")
                + Wire.chunk("is")
                + Wire.usageChunk(Wire.usage(128, 2, 128L))
                + Wire.DONE
                + "event: trtllm.perf_metrics\ndata: {\"ctx_server\":\"h:1\",\"usage\":\"n/a\"}\n\n")
            .replace("\n", "\r\n");
    v.add(vector("trtFramingCrlfAndPerfMetrics", Order.CONTEXT_FIRST,
        leg(PATH, trtRequest("context_only", ",\"disagg_request_id\":" + TRT_ID), json,
            Wire.trtContextResponse(TRT_ID, TRT_ID, Wire.usage(128, 1, 9L))),
        leg(PATH, trtRequest("generation_only", ",\"ctx_request_id\":" + TRT_ID), "text/event-stream; charset=utf-8", stream),
        stream.replace("{\"cached_tokens\":128}", "{\"cached_tokens\":9}")));

    // generation_first, streaming.
    ctxUsage = "{\"prompt_tokens\":128,\"completion_tokens\":1,\"total_tokens\":129,\"prompt_tokens_details\":{\"cached_tokens\":9}}";
    stream = Wire.chatStream(genUsage, "Par", "is");
    v.add(vector("trtGenerationFirstStream", Order.GENERATION_FIRST,
        leg(PATH, trtRequest("context_only", ",\"disagg_request_id\":" + TRT_ID + ",\"schedule_style\":1"), json,
            Wire.trtContextResponse(TRT_ID, TRT_ID, ctxUsage)),
        leg(PATH, trtRequest("generation_only", ",\"ctx_request_id\":" + TRT_ID + ",\"disagg_request_id\":" + TRT_ID + ",\"schedule_style\":1"),
            sse, stream),
        stream.replace("{\"cached_tokens\":128}", "{\"cached_tokens\":9}")));

    // generation_first, non-streaming.
    genBody = Wire.chatCompletion("gen", Wire.usage(101, 13, 101L));
    v.add(vector("trtGenerationFirstJson", Order.GENERATION_FIRST,
        leg(PATH, trtRequest("context_only", ",\"disagg_request_id\":" + TRT_ID + ",\"schedule_style\":1"), json,
            Wire.trtContextResponse(TRT_ID, TRT_ID, Wire.usage(101, 1, 7L))),
        leg(PATH, trtRequest("generation_only", ",\"ctx_request_id\":" + TRT_ID + ",\"schedule_style\":1"), json, genBody),
        genBody.replace(Wire.usage(101, 13, 101L), Wire.usage(101, 13, 7L))));

    // A retried context call: the generation names the attempt that succeeded.
    genBody = Wire.chatCompletion("g", Wire.usage(64, 10, 64L));
    v.add(vector("trtRetriedContextCall", Order.CONTEXT_FIRST,
        leg(PATH, trtRequest("context_only", ",\"disagg_request_id\":" + TRT_RETRY_ID), json,
            Wire.trtContextResponse(TRT_RETRY_ID, TRT_RETRY_ID, Wire.usage(64, 1, 32L))),
        leg(PATH, trtRequest("generation_only", ",\"ctx_request_id\":" + TRT_RETRY_ID + ",\"disagg_request_id\":" + TRT_ID), json, genBody),
        genBody.replace(Wire.usage(64, 10, 64L), Wire.usage(64, 10, 32L))));

    // G8: ctx_usage carried in the generation request.
    stream = Wire.chatStream(Wire.usage(10, 3, 10L), "a", "b");
    v.add(vector("trtCtxUsageCarriedInGenerationRequest", Order.CARRIED, null,
        leg(PATH, trtRequest("generation_only",
                ",\"ctx_request_id\":1,\"ctx_usage\":{\"prompt_tokens\":10,\"completion_tokens\":0,\"total_tokens\":10,\"prompt_tokens_details\":{\"cached_tokens\":4}}"),
            sse, stream),
        stream.replace("{\"cached_tokens\":10}", "{\"cached_tokens\":4}")));

    // G9a: vLLM toy proxy.
    genBody = Wire.chatCompletion("r-9", Wire.usage(999, 8, 999L));
    v.add(vector("vllmProxyJson", Order.CONTEXT_FIRST,
        leg(PATH, vllmPrefill(), json, Wire.chatCompletion("r-9", Wire.usage(186, 1, 64L)), "x-request-id", "r-9"),
        leg(PATH, vllmDecode(false), json, genBody, "x-request-id", "r-9"),
        genBody.replace(Wire.usage(999, 8, 999L),
            "{\"prompt_tokens\":186,\"completion_tokens\":8,\"total_tokens\":194,\"prompt_tokens_details\":{\"cached_tokens\":64}}")));

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
        continuous.toString().replace("{\"cached_tokens\":1655}", "{\"cached_tokens\":1024}")));

    // G11: llm-d sidecar legs.
    stream = Wire.chatStream("{\"prompt_tokens\":64,\"completion_tokens\":2,\"total_tokens\":66,\"prompt_tokens_details\":{\"cached_tokens\":49}}", "x");
    v.add(vector("llmdSidecarStream", Order.CONTEXT_FIRST,
        leg(PATH, vllmPrefill(), json, Wire.chatCompletion("u", Wire.usage(64, 1, 8L)), "x-request-id", "uuid-7"),
        leg(PATH, vllmDecode(true), sse, stream, "x-request-id", "uuid-7"),
        stream.replace("{\"cached_tokens\":49}", "{\"cached_tokens\":8}")));

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
    for (String[] c : cases) {
      String body = Wire.chatCompletion(c[0], c[2]);
      v.add(vector("vllmRouter-" + c[0], Order.CONTEXT_FIRST,
          leg(PATH, vllmPrefill(), json, Wire.chatCompletion(c[0], c[1]), "x-request-id", "router-" + c[0]),
          leg(PATH, vllmDecode(false), json, body, "x-request-id", "router-" + c[0]),
          body.replace(c[2], c[3])));
    }

    // SGLang: identical bodies, told apart by cluster; dispatched together (generation first).
    String sgl =
        "{\"model\":\"" + Wire.MODEL + "\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stream\":true,"
            + "\"stream_options\":{\"include_usage\":true},\"bootstrap_host\":\"10.1.0.5\",\"bootstrap_port\":8998,"
            + "\"bootstrap_room\":9223372036854775806}";
    String genStream = Wire.chatStream(Wire.usage(300, 20, 300L), "H", "ello");
    v.add(vector("sglangIdenticalBodiesByCluster", Order.GENERATION_FIRST,
        legOn(PATH, EngineRequests.CONTEXT_CLUSTER, sgl, sse, Wire.chatStream(Wire.usage(300, 1, 256L), "H")),
        legOn(PATH, EngineRequests.GENERATION_CLUSTER, sgl, sse, genStream),
        genStream.replace("{\"cached_tokens\":300}", "{\"cached_tokens\":256}")));

    // G9b: the Responses API, JSON and stream.
    String respGen = "{\"input_tokens\":98,\"output_tokens\":8,\"total_tokens\":106,\"input_tokens_details\":{\"cached_tokens\":98},\"output_tokens_details\":{\"reasoning_tokens\":3}}";
    String respCtx = "{\"input_tokens\":98,\"output_tokens\":1,\"total_tokens\":99,\"input_tokens_details\":{\"cached_tokens\":32},\"output_tokens_details\":{\"reasoning_tokens\":0}}";
    String resp = Wire.response(respGen);
    v.add(vector("responsesApiJson", Order.CONTEXT_FIRST,
        leg("/v1/responses", "{\"model\":\"m\",\"input\":\"hi\",\"kv_transfer_params\":{\"do_remote_decode\":true}}", json,
            Wire.response(respCtx), "x-request-id", "resp-1"),
        leg("/v1/responses", "{\"model\":\"m\",\"input\":\"hi\",\"kv_transfer_params\":{\"do_remote_prefill\":true}}", json, resp,
            "x-request-id", "resp-1"),
        resp.replace("{\"cached_tokens\":98}", "{\"cached_tokens\":32}")));
    stream = Wire.responseStream(respGen);
    v.add(vector("responsesApiStream", Order.CONTEXT_FIRST,
        leg("/v1/responses", "{\"model\":\"m\",\"input\":\"hi\"}", json, Wire.response(respCtx),
            "x-disagg-phase", "prefill", "x-disagg-request-id", "resp-2"),
        leg("/v1/responses", "{\"model\":\"m\",\"input\":\"hi\",\"stream\":true}", sse, stream,
            "x-disagg-phase", "decode", "x-disagg-request-id", "resp-2"),
        stream.replace("{\"cached_tokens\":98}", "{\"cached_tokens\":32}")));

    // Legacy /v1/completions: a context worker without details means zero cached.
    String completion = Wire.completion(Wire.usage(17, 16, 17L));
    v.add(vector("legacyCompletions", Order.CONTEXT_FIRST,
        leg("/v1/completions", "{\"model\":\"m\",\"prompt\":\"x\",\"kv_transfer_params\":{\"do_remote_decode\":true}}", json,
            Wire.completion(Wire.usage(17, 1, null)), "x-request-id", "c-1"),
        leg("/v1/completions", "{\"model\":\"m\",\"prompt\":\"x\",\"kv_transfer_params\":{\"do_remote_prefill\":true}}", json, completion,
            "x-request-id", "c-1"),
        completion.replace(Wire.usage(17, 16, 17L), Wire.usage(17, 16, 0L))));
    return List.copyOf(v);
  }

  /**
   * The Anthropic Messages vectors of {@link MessagesScenarioTest}: vLLM's {@code /v1/messages} with the
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
    return List.of(
        vector("messagesJsonContextOnChat", Order.CONTEXT_FIRST,
            leg("/v1/chat/completions", EngineRequests.messagesRequest(true, false), json,
                Wire.chatCompletion("p", Wire.usage(186, 1, 64L)), "x-request-id", "m-1"),
            leg(path, EngineRequests.messagesRequest(false, false), json, body, "x-request-id", "m-1"),
            Wire.message(fixed)),
        vector("messagesStreamContextOnMessages", Order.CONTEXT_FIRST,
            leg(path, EngineRequests.messagesRequest(true, false), json, Wire.prefillMessage(Wire.messagesUsage(122, 1, 0L, 64L)),
                "x-request-id", "m-2"),
            leg(path, EngineRequests.messagesRequest(false, true), sse, stream, "x-request-id", "m-2"),
            expectedStream),
        vector("messagesStreamConcurrentContextStream", Order.GENERATION_FIRST,
            leg(path, EngineRequests.messagesRequest(true, true), sse,
                Wire.messageStream(start, Wire.messagesUsage(122, 1, 0L, 64L), "Paris"),
                "x-request-id", "m-3", "x-disagg-order", "concurrent"),
            leg(path, EngineRequests.messagesRequest(false, true), sse, stream, "x-request-id", "m-3", "x-disagg-order", "concurrent"),
            expectedStream));
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
        stream.replace("{\"cached_tokens\":98}", "{\"cached_tokens\":32}"));
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
          msgpack(v.context(), style), msgpack(v.generation(), style), v.expectedGeneration()));
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
