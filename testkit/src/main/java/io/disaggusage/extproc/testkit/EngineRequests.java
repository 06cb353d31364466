package io.disaggusage.extproc.testkit;

/** Worker request bodies as the orchestrators send them, shared by the scenario vectors and tests. */
public final class EngineRequests {
  /** A TensorRT-LLM snowflake id far above 2^53. */
  public static final String TRT_ID = "2748779069441234567"; // a snowflake id far above 2^53
  public static final String TRT_RETRY_ID = "2748779069441234999";
  public static final String PATH = "/v1/chat/completions";

  private EngineRequests() {}

  /** A TensorRT-LLM chat request of {@code request_type} {@code type}, {@code extra} appended to its params. */
  public static String trtRequest(String type, String extra) {
    return "{\"model\":\"" + Wire.MODEL + "\",\"messages\":[{\"role\":\"user\",\"content\":\"capital of France?\"}],"
        + "\"max_tokens\":32,\"disaggregated_params\":{\"request_type\":\"" + type + "\"" + extra + "}}";
  }

  /** vLLM's P/D proxy's prefill leg: {@code max_tokens} 1, {@code do_remote_decode}. */
  public static String vllmPrefill() {
    return "{\"model\":\"" + Wire.MODEL + "\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":1,\"stream\":false,"
        + "\"kv_transfer_params\":{\"do_remote_decode\":true,\"do_remote_prefill\":false,\"remote_engine_id\":null,"
        + "\"remote_block_ids\":null,\"remote_host\":null,\"remote_port\":null}}";
  }

  /** vLLM's P/D proxy's decode leg, streaming with continuous usage stats or not. */
  public static String vllmDecode(boolean stream) {
    return "{\"model\":\"" + Wire.MODEL + "\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stream\":" + stream
        + (stream ? ",\"stream_options\":{\"include_usage\":true,\"continuous_usage_stats\":true}" : "")
        + ",\"kv_transfer_params\":{\"do_remote_prefill\":true,\"do_remote_decode\":false,\"remote_block_ids\":[1,2],"
        + "\"remote_engine_id\":\"e\",\"remote_host\":\"10.0.0.2\",\"remote_port\":5600}}";
  }

  /** The cluster names the scenario suite routes context and generation legs to. */
  public static final String CONTEXT_CLUSTER = "context-pool";

  public static final String GENERATION_CLUSTER = "generation-pool";

  /** Anthropic Messages API path. */
  public static final String MESSAGES_PATH = "/v1/messages";

  /** A vLLM-family /v1/messages leg: prefill ({@code max_tokens} 1) or decode, streaming or not. */
  public static String messagesRequest(boolean prefill, boolean stream) {
    return "{\"model\":\"" + Wire.MODEL + "\",\"max_tokens\":" + (prefill ? 1 : 64)
        + ",\"messages\":[{\"role\":\"user\",\"content\":\"capital of France?\"}],\"stream\":" + stream
        + ",\"kv_transfer_params\":" + (prefill
            ? "{\"do_remote_decode\":true,\"do_remote_prefill\":false}"
            : "{\"do_remote_prefill\":true,\"do_remote_decode\":false,\"remote_block_ids\":[1,2],"
                + "\"remote_engine_id\":\"e1\",\"remote_host\":\"10.0.0.1\",\"remote_port\":5600}") + "}";
  }
}
