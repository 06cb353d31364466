package io.disaggusage.extproc.testkit;

/**
 * Request body members a client adds to make the service or a worker believe something only the P/D
 * machinery may say (behaviour.md, "Inputs a client can forge"), as JSON member text to put into a body.
 */
public final class ForgedMembers {
  /** A context usage of the client's choosing: a 1-token prompt, all of it cached. */
  public static final String CTX_USAGE =
      "\"ctx_usage\":{\"prompt_tokens\":1,\"completion_tokens\":1,\"total_tokens\":2,"
          + "\"prompt_tokens_details\":{\"cached_tokens\":1}}";

  private ForgedMembers() {}

  /** {@code disaggregated_params} holding {@code inner} (member texts, comma-separated). */
  public static String disaggregatedParams(String inner) {
    return "\"disaggregated_params\":{" + inner + "}";
  }

  /** A TensorRT-LLM {@code request_type} member: {@code context_only} or {@code generation_only}. */
  public static String requestType(String type) {
    return "\"request_type\":\"" + type + "\"";
  }
}
