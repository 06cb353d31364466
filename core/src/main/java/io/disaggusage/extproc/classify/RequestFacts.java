package io.disaggusage.extproc.classify;

import io.disaggusage.extproc.usage.ContextUsage;

/**
 * What a request body says about the disaggregated flow it belongs to. Ids are exact decimal text
 * (TensorRT-LLM and SGLang ids are int64 values above 2^53), never doubles.
 *
 * @param model the {@code model} field
 * @param stream the {@code stream} flag
 * @param trtRequestType TensorRT-LLM {@code disaggregated_params.request_type}
 * @param trtDisaggRequestId {@code disaggregated_params.disagg_request_id}
 * @param trtCtxRequestId {@code disaggregated_params.ctx_request_id}
 * @param trtScheduleStyle {@code disaggregated_params.schedule_style} as text ({@code 0}, {@code 1},
 *     or a name)
 * @param trtCtxUsage {@code disaggregated_params.ctx_usage}: the context usage, carried in the request
 * @param remoteDecode vLLM {@code kv_transfer_params.do_remote_decode} is {@code true} (context leg)
 * @param remotePrefill vLLM {@code kv_transfer_params.do_remote_prefill} is {@code true} (generation)
 * @param kvRemoteRequestId vLLM {@code kv_transfer_params.remote_request_id}: in a decode request, the
 *     prefill's handle that its response returned and a router relayed
 * @param kvTransferId {@code kv_transfer_params.transfer_id}: one id a router (SMG's Mooncake mode) mints
 *     for both legs
 * @param bootstrapRoom SGLang {@code bootstrap_room}: the id, or for an array (n>1 or a batch) a
 *     digest of all its elements, {@code batch<n>:<sha-256 hex>} ({@link BatchDigest})
 * @param bootstrapHost SGLang {@code bootstrap_host}, or the digest of a {@code bootstrap_host} array
 * @param bootstrapBatched {@code bootstrap_room} was an array (n>1 or a batch)
 * @param malformed the body is not a JSON object, or could not be scanned
 * @param fingerprint what both legs of the flow share ({@link PromptFingerprint}); null when the body
 *     was not read whole or carried no prompt-bearing member
 */
public record RequestFacts(
    String model,
    Boolean stream,
    String trtRequestType,
    String trtDisaggRequestId,
    String trtCtxRequestId,
    String trtScheduleStyle,
    ContextUsage trtCtxUsage,
    boolean remoteDecode,
    boolean remotePrefill,
    String kvRemoteRequestId,
    String kvTransferId,
    String bootstrapRoom,
    String bootstrapHost,
    boolean bootstrapBatched,
    boolean malformed,
    PromptFingerprint fingerprint) {

  /** No body was read (or it said nothing). */
  public static final RequestFacts NONE =
      new RequestFacts(
          null, null, null, null, null, null, null, false, false, null, null, null, null, false, false, null);
}
