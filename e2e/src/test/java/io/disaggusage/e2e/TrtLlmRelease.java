package io.disaggusage.e2e;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.disaggusage.extproc.testkit.MsgpackBodies;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.Map;

/**
 * What one {@code trtllm-serve disaggregated} release does on the orchestrator→worker hop, as far as the
 * usage correction sees it: the schedule style it is configured with, whether the generation request
 * carries the context worker's usage ({@code disaggregated_params.ctx_usage}, PR #14177), and the request
 * body transport (JSON, or msgspec MessagePack with {@code X-TRTLLM-Msgpack: 1} since PR #16873).
 */
record TrtLlmRelease(String name, ScheduleStyle style, boolean forwardsCtxUsage, Transport transport) {
  /** {@code DisaggScheduleStyle}, an IntEnum: the number is what {@code model_dump(mode="json")} writes. */
  enum ScheduleStyle {
    CONTEXT_FIRST(0),
    GENERATION_FIRST(1);

    final int wire;

    ScheduleStyle(int wire) {
      this.wire = wire;
    }
  }

  /** How a worker request body is written and flagged. */
  enum Transport {
    /** {@code model_dump_json()}; the releases before #16873. */
    JSON(Map.of("content-type", "application/json")),
    /**
     * msgspec MessagePack of {@code model_dump(mode="json", exclude_unset=True)}; the content type stays
     * JSON because the worker's route picks the decoder by the header, not the type.
     */
    MSGPACK(Map.of("content-type", "application/json", "x-trtllm-msgpack", "1"));

    private static final ObjectMapper MAPPER = new ObjectMapper();
    final Map<String, String> headers;

    Transport(Map<String, String> headers) {
      this.headers = headers;
    }

    byte[] encode(ObjectNode body) {
      try {
        byte[] json = MAPPER.writeValueAsBytes(body);
        // msgspec writes the smallest form of every value, as COMPACT does
        return this == JSON ? json : MsgpackBodies.fromJson(json, MsgpackBodies.Style.COMPACT);
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
  }

  /** Before #14177: no {@code ctx_usage}, JSON bodies (the generation worker's usage goes out as it is). */
  static TrtLlmRelease beforeCtxUsage(ScheduleStyle style) {
    return new TrtLlmRelease("before #14177, " + style, style, false, Transport.JSON);
  }

  /** #14177 to before #16873: context-first generation requests carry {@code ctx_usage}; JSON bodies. */
  static TrtLlmRelease ctxUsageOverJson() {
    return new TrtLlmRelease("#14177, JSON", ScheduleStyle.CONTEXT_FIRST, true, Transport.JSON);
  }

  /** Since #16873 (the commit the fixture follows): {@code ctx_usage} and MessagePack bodies. */
  static TrtLlmRelease ctxUsageOverMsgpack() {
    return new TrtLlmRelease("#16873, MessagePack", ScheduleStyle.CONTEXT_FIRST, true, Transport.MSGPACK);
  }

  /**
   * Since #16873, generation-first: MessagePack bodies; both requests are built before any context
   * response exists, so no {@code ctx_usage} is carried and the service looks the context usage up.
   */
  static TrtLlmRelease generationFirstOverMsgpack() {
    return new TrtLlmRelease("#16873, generation-first, MessagePack", ScheduleStyle.GENERATION_FIRST, true, Transport.MSGPACK);
  }

  @Override
  public String toString() {
    return name;
  }
}
