package io.disaggusage.extproc.scenario;

/**
 * Realistic worker bodies, shaped like what TensorRT-LLM, vLLM and SGLang put on the wire
 * (engines.md), with the usage object supplied by each scenario.
 */
public final class Wire {
  public static final String MODEL = "meta-llama/Llama-3.1-8B-Instruct";

  private Wire() {}

  public static String chatCompletion(String id, String usage) {
    return "{\"id\":\"chatcmpl-" + id + "\",\"object\":\"chat.completion\",\"created\":1764400000,\"model\":\""
        + MODEL + "\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"Paris is the capital.\"},"
        + "\"logprobs\":null,\"finish_reason\":\"stop\"}],\"usage\":" + usage + "}";
  }

  /** A TensorRT-LLM context response: first token, ids, finish_reason length. */
  public static String trtContextResponse(String ctxRequestId, String disaggRequestId, String usage) {
    return "{\"id\":\"chatcmpl-ctx\",\"object\":\"chat.completion\",\"created\":1764400000,\"model\":\"" + MODEL
        + "\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"Paris\"},\"logprobs\":null,"
        + "\"finish_reason\":\"length\",\"disaggregated_params\":{\"request_type\":\"context_only\",\"first_gen_tokens\":[12366],"
        + "\"ctx_request_id\":" + ctxRequestId + ",\"disagg_request_id\":" + disaggRequestId
        + ",\"encoded_opaque_state\":\"b3BhcXVl\"}}],\"prompt_token_ids\":[1,2,3],\"usage\":" + usage + "}";
  }

  public static String completion(String usage) {
    return "{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":1764400000,\"model\":\"" + MODEL
        + "\",\"choices\":[{\"index\":0,\"text\":\" Paris\",\"logprobs\":null,\"finish_reason\":\"length\"}],\"usage\":"
        + usage + "}";
  }

  public static String chunk(String content) {
    return "data: {\"id\":\"chatcmpl-g\",\"object\":\"chat.completion.chunk\",\"created\":1764400000,\"model\":\"" + MODEL
        + "\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" + content + "\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n";
  }

  public static String usageChunk(String usage) {
    return "data: {\"id\":\"chatcmpl-g\",\"object\":\"chat.completion.chunk\",\"created\":1764400000,\"model\":\"" + MODEL
        + "\",\"choices\":[],\"usage\":" + usage + "}\n\n";
  }

  public static final String DONE = "data: [DONE]\n\n";

  /** A chat stream: content chunks, the final usage chunk, [DONE]. */
  public static String chatStream(String usage, String... contents) {
    StringBuilder sb = new StringBuilder();
    for (String c : contents) {
      sb.append(chunk(c));
    }
    return sb.append(usageChunk(usage)).append(DONE).toString();
  }

  public static String response(String usage) {
    return "{\"id\":\"resp_1\",\"object\":\"response\",\"created_at\":1764400000,\"status\":\"completed\",\"model\":\""
        + MODEL + "\",\"output\":[],\"parallel_tool_calls\":true,\"tool_choice\":\"auto\",\"tools\":[],\"usage\":" + usage + "}";
  }

  public static String responseStream(String usage) {
    return "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\"}}\n\n"
        + "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":1,\"item_id\":\"m1\",\"output_index\":0,\"content_index\":0,\"delta\":\"Paris\"}\n\n"
        + "event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":2,\"response\":"
        + response(usage) + "}\n\n";
  }

  public static String usage(long prompt, long completion, Long cached) {
    return "{\"prompt_tokens\":" + prompt + ",\"completion_tokens\":" + completion + ",\"total_tokens\":" + (prompt + completion)
        + (cached == null ? "" : ",\"prompt_tokens_details\":{\"cached_tokens\":" + cached + "}") + "}";
  }
}
