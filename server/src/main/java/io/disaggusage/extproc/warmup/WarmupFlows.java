package io.disaggusage.extproc.warmup;

import io.disaggusage.extproc.config.Config;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Pattern;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;

/**
 * The synthetic disaggregated flows the warm-up sends, one per shape of traffic the service corrects:
 * vLLM-family legs keyed by {@code x-request-id} (JSON and SSE generation, chat and completions),
 * TensorRT-LLM legs keyed by their body ids (JSON and MessagePack requests), the Responses API and the
 * Anthropic Messages API. Context usage says 3 cached tokens, generation usage says 63 (the bug), so a
 * corrected generation response says 3 and no longer 63.
 */
final class WarmupFlows {
  static final String MODEL = "warmup";
  private static final String CTX_USAGE =
      "{\"prompt_tokens\":64,\"completion_tokens\":1,\"total_tokens\":65,\"prompt_tokens_details\":{\"cached_tokens\":3}}";
  private static final String GEN_USAGE =
      "{\"prompt_tokens\":64,\"completion_tokens\":2,\"total_tokens\":66,\"prompt_tokens_details\":{\"cached_tokens\":63}}";
  private static final String CTX_RESPONSES_USAGE =
      "{\"input_tokens\":64,\"input_tokens_details\":{\"cached_tokens\":3},\"output_tokens\":1,\"total_tokens\":65}";
  private static final String GEN_RESPONSES_USAGE =
      "{\"input_tokens\":64,\"input_tokens_details\":{\"cached_tokens\":63},\"output_tokens\":2,\"total_tokens\":66}";
  private static final String CACHED = "cached_tokens";
  private static final String JSON = "application/json";
  private static final String SSE = "text/event-stream";

  private WarmupFlows() {}

  /** One leg as Envoy sees it: request head and body, upstream answer. */
  record Leg(
      String path,
      String cluster,
      List<String> extraHeaders,
      byte[] requestBody,
      String responseType,
      byte[] responseBody) {}

  /**
   * A context leg, then its generation leg; the generation response came out corrected when its usage
   * member {@code cacheCount} says the context worker's 3, no longer the generation worker's 63.
   */
  record Flow(String name, Leg context, Leg generation, String cacheCount) {
    boolean isCorrected(String clientBody) {
      return says(clientBody, 3) && !says(clientBody, 63);
    }

    private boolean says(String body, int count) {
      return Pattern.compile("\"" + cacheCount + "\":" + count + "(?!\\d)").matcher(body).find();
    }
  }

  /**
   * The flows for {@code config}: legs carry its first context and generation cluster names (when it
   * names any), and only paths it handles are sent, so every flow is expected to come out corrected.
   */
  static List<Flow> forConfig(Config config, int round) {
    Config.Classification classification = config.classification();
    String contextCluster = first(classification.contextClusters(), "warmup-context");
    String generationCluster = first(classification.generationClusters(), "warmup-generation");
    Legs legs = new Legs(contextCluster, generationCluster, round);
    List<Flow> flows = new ArrayList<>();
    for (Flow flow : legs.all()) {
      if (classification.paths().contains(flow.context().path())) {
        flows.add(flow);
      }
    }
    return flows;
  }

  private static String first(List<String> names, String otherwise) {
    return names.isEmpty() ? otherwise : names.get(0);
  }

  /** Builds the legs of one round; ids are unique per round. */
  private record Legs(String contextCluster, String generationCluster, int round) {
    List<Flow> all() {
      return List.of(vllmChat(false), vllmChat(true), vllmCompletions(), trtChat(false), trtChat(true), responses(), messages());
    }

    private Flow vllmChat(boolean stream) {
      String request =
          "{\"model\":\"" + MODEL + "\",\"messages\":[{\"role\":\"user\",\"content\":\"w\"}],\"max_tokens\":4,"
              + "\"stream\":%b,\"stream_options\":{\"include_usage\":true},\"kv_transfer_params\":{\"%s\":true}}";
      List<String> id = requestId(stream ? "sse" : "json");
      return new Flow(
          stream ? "vllm-chat-sse" : "vllm-chat-json",
          context("/v1/chat/completions", id, utf8(String.format(request, false, "do_remote_decode")),
              chatCompletion(CTX_USAGE, ",\"kv_transfer_params\":{\"remote_engine_id\":\"w\",\"remote_block_ids\":[1]}")),
          generation("/v1/chat/completions", id, utf8(String.format(request, stream, "do_remote_prefill")),
              stream ? SSE : JSON,
              stream ? chatStream(GEN_USAGE) : chatCompletion(GEN_USAGE, "")),
          CACHED);
    }

    private Flow vllmCompletions() {
      List<String> id = requestId("cmpl");
      String request = "{\"model\":\"" + MODEL + "\",\"prompt\":\"w\",\"max_tokens\":4,\"kv_transfer_params\":";
      return new Flow(
          "vllm-completions",
          context("/v1/completions", id, utf8(request + "{\"do_remote_decode\":true}}"), completion(CTX_USAGE)),
          generation("/v1/completions", id, utf8(request + "{\"do_remote_prefill\":true}}"), JSON,
              completion(GEN_USAGE)),
          CACHED);
    }

    /** TensorRT-LLM: ids in the bodies; MessagePack request bodies with {@code x-trtllm-msgpack: 1}. */
    private Flow trtChat(boolean msgpack) {
      long disaggId = 8_000_000_000L + 100L * round + (msgpack ? 10 : 0);
      long ctxId = disaggId + 1;
      List<String> headers = msgpack ? List.of("x-trtllm-msgpack:1") : List.of();
      return new Flow(
          msgpack ? "trtllm-chat-msgpack" : "trtllm-chat-json",
          context("/v1/chat/completions", headers,
              trtRequest(msgpack, false, "context_only", "disagg_request_id", disaggId),
              utf8("{\"id\":\"chatcmpl-c\",\"object\":\"chat.completion\",\"model\":\"" + MODEL + "\",\"choices\":[{\"index\":0,"
                  + "\"message\":{\"role\":\"assistant\",\"content\":\"w\"},\"finish_reason\":\"length\",\"disaggregated_params\":"
                  + "{\"request_type\":\"context_only\",\"first_gen_tokens\":[7],\"ctx_request_id\":" + ctxId
                  + ",\"disagg_request_id\":" + disaggId + "}}],\"usage\":" + CTX_USAGE + "}")),
          generation("/v1/chat/completions", headers,
              trtRequest(msgpack, true, "generation_only", "ctx_request_id", ctxId), SSE, chatStream(GEN_USAGE)),
          CACHED);
    }

    private Flow responses() {
      List<String> id = requestId("resp");
      String request = "{\"model\":\"" + MODEL + "\",\"input\":\"w\",\"stream\":%b,\"kv_transfer_params\":{\"%s\":true}}";
      String response = "{\"id\":\"resp_w\",\"object\":\"response\",\"status\":\"completed\",\"model\":\"" + MODEL
          + "\",\"output\":[],\"usage\":%s}";
      return new Flow(
          "responses",
          context("/v1/responses", id, utf8(String.format(request, false, "do_remote_decode")),
              utf8(String.format(response, CTX_RESPONSES_USAGE))),
          generation("/v1/responses", id, utf8(String.format(request, true, "do_remote_prefill")), SSE,
              utf8("event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":"
                  + "{\"id\":\"resp_w\",\"status\":\"in_progress\"}}\n\nevent: response.completed\ndata: "
                  + "{\"type\":\"response.completed\",\"sequence_number\":1,\"response\":"
                  + String.format(response, GEN_RESPONSES_USAGE) + "}\n\n")),
          CACHED);
    }

    /** Anthropic Messages as vLLM serves it: the cache read comes from the context worker. */
    private Flow messages() {
      List<String> id = requestId("msg");
      String request = "{\"model\":\"" + MODEL + "\",\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":\"w\"}],"
          + "\"stream\":%b,\"kv_transfer_params\":{\"%s\":true}}";
      String message = "{\"id\":\"msg_w\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"" + MODEL
          + "\",\"usage\":%s}";
      return new Flow(
          "messages",
          context("/v1/messages", id, utf8(String.format(request, false, "do_remote_decode")),
              utf8(String.format(message, "{\"input_tokens\":61,\"output_tokens\":1,\"cache_read_input_tokens\":3}"))),
          generation("/v1/messages", id, utf8(String.format(request, false, "do_remote_prefill")), JSON,
              utf8(String.format(message, "{\"input_tokens\":1,\"output_tokens\":2,\"cache_read_input_tokens\":63}"))),
          "cache_read_input_tokens");
    }

    /** The {@code x-request-id} both legs of a vLLM-family flow carry (as vLLM's P/D proxies set it). */
    private List<String> requestId(String flow) {
      return List.of("x-request-id:warmup-" + round + "-" + flow);
    }

    private Leg context(String path, List<String> headers, byte[] request, byte[] response) {
      return new Leg(path, contextCluster, headers, request, JSON, response);
    }

    private Leg generation(String path, List<String> headers, byte[] request, String type, byte[] response) {
      return new Leg(path, generationCluster, headers, request, type, response);
    }
  }

  private static byte[] chatCompletion(String usage, String tail) {
    return utf8("{\"id\":\"chatcmpl-w\",\"object\":\"chat.completion\",\"model\":\"" + MODEL + "\",\"choices\":[{\"index\":0,"
        + "\"message\":{\"role\":\"assistant\",\"content\":\"w\"},\"finish_reason\":\"stop\"}],\"usage\":" + usage + tail + "}");
  }

  private static byte[] completion(String usage) {
    return utf8("{\"id\":\"cmpl-w\",\"object\":\"text_completion\",\"model\":\"" + MODEL + "\",\"choices\":[{\"index\":0,"
        + "\"text\":\"w\",\"finish_reason\":\"stop\"}],\"usage\":" + usage + "}");
  }

  private static byte[] chatStream(String usage) {
    String chunk = "data: {\"id\":\"chatcmpl-w\",\"object\":\"chat.completion.chunk\",\"model\":\"" + MODEL + "\",\"choices\":";
    return utf8(chunk + "[{\"index\":0,\"delta\":{\"content\":\"w\"},\"finish_reason\":null}]}\n\n"
        + chunk + "[{\"index\":0,\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}]}\n\n"
        + chunk + "[],\"usage\":" + usage + "}\n\ndata: [DONE]\n\n");
  }

  /** A TensorRT-LLM worker request: {@code disaggregated_params} with its request type and one id. */
  private static byte[] trtRequest(boolean msgpack, boolean stream, String type, String idName, long id) {
    if (!msgpack) {
      return utf8("{\"model\":\"" + MODEL + "\",\"messages\":[{\"role\":\"user\",\"content\":\"w\"}],\"stream\":" + stream
          + ",\"stream_options\":{\"include_usage\":true},\"disaggregated_params\":{\"request_type\":\"" + type + "\",\""
          + idName + "\":" + id + "}}");
    }
    try (MessageBufferPacker packer = MessagePack.newDefaultBufferPacker()) {
      packer.packMapHeader(4).packString("model").packString(MODEL);
      packer.packString("stream").packBoolean(stream);
      packer.packString("stream_options").packMapHeader(1).packString("include_usage").packBoolean(true);
      packer.packString("disaggregated_params").packMapHeader(2);
      packer.packString("request_type").packString(type).packString(idName).packLong(id);
      return packer.toByteArray();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static byte[] utf8(String text) {
    return text.getBytes(StandardCharsets.UTF_8);
  }
}
