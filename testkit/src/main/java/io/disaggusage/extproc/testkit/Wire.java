package io.disaggusage.extproc.testkit;

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

  /**
   * vLLM's Anthropic Messages response ({@code model_dump(exclude_none=True)}, compact): a decode
   * worker's, whose {@code kv_transfer_params} is null and so left out.
   */
  public static String message(String usage) {
    return "{\"id\":\"chatcmpl-a\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"text\","
        + "\"text\":\"Paris is the capital.\"}],\"model\":\"" + MODEL + "\",\"stop_reason\":\"end_turn\",\"usage\":" + usage + "}";
  }

  /** A vLLM prefill worker's Anthropic Messages response: one token, and the KV transfer parameters. */
  public static String prefillMessage(String usage) {
    return "{\"id\":\"chatcmpl-p\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"text\","
        + "\"text\":\"Paris\"}],\"model\":\"" + MODEL + "\",\"stop_reason\":\"max_tokens\",\"usage\":" + usage
        + ",\"kv_transfer_params\":{\"do_remote_prefill\":true,\"do_remote_decode\":false,\"remote_block_ids\":[1,2],"
        + "\"remote_engine_id\":\"e1\",\"remote_host\":\"10.0.0.1\",\"remote_port\":5600}}";
  }

  /**
   * vLLM's Anthropic Messages stream ({@code model_dump_json(exclude_unset=True)}: the nested message
   * of {@code message_start} has no {@code type} or {@code role}): usage in {@code message_start} and
   * {@code message_delta}, one text block, {@code message_stop}, no {@code [DONE]}. {@code ping}
   * (which the Anthropic API sends and vLLM does not) follows {@code message_start}.
   */
  public static String messageStream(String startUsage, String deltaUsage, String... texts) {
    StringBuilder sb = new StringBuilder();
    sb.append(namedEvent("message_start", "{\"type\":\"message_start\",\"message\":{\"id\":\"chatcmpl-s\",\"content\":[],"
        + "\"model\":\"" + MODEL + "\",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":" + startUsage + "}}"));
    sb.append(namedEvent("ping", "{\"type\":\"ping\"}"));
    sb.append(namedEvent("content_block_start",
        "{\"type\":\"content_block_start\",\"content_block\":{\"type\":\"text\",\"text\":\"\"},\"index\":0}"));
    for (String t : texts) {
      sb.append(namedEvent("content_block_delta",
          "{\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"" + t + "\"},\"index\":0}"));
    }
    sb.append(namedEvent("content_block_stop", "{\"type\":\"content_block_stop\",\"index\":0}"));
    sb.append(namedEvent("message_delta",
        "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":" + deltaUsage + "}"));
    return sb.append(namedEvent("message_stop", "{\"type\":\"message_stop\"}")).toString();
  }

  private static String namedEvent(String name, String data) {
    return "event: " + name + "\ndata: " + data + "\n\n";
  }

  /** vLLM's {@code AnthropicUsage} in its field order; cache counts left out when null (unknown). */
  public static String messagesUsage(long input, long output, Long cacheCreation, Long cacheRead) {
    return "{\"input_tokens\":" + input + ",\"output_tokens\":" + output
        + (cacheCreation == null ? "" : ",\"cache_creation_input_tokens\":" + cacheCreation)
        + (cacheRead == null ? "" : ",\"cache_read_input_tokens\":" + cacheRead) + "}";
  }

  public static String usage(long prompt, long completion, Long cached) {
    return "{\"prompt_tokens\":" + prompt + ",\"completion_tokens\":" + completion + ",\"total_tokens\":" + (prompt + completion)
        + (cached == null ? "" : ",\"prompt_tokens_details\":{\"cached_tokens\":" + cached + "}") + "}";
  }
}
