package io.disaggusage.e2e;

import io.disaggusage.e2e.Orchestrator.Answer;
import io.disaggusage.extproc.testkit.Wire;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * A vLLM P/D flow for the fault tests: the prefill call through the context listener, then a streamed
 * decode call through the generation listener, both under one {@code X-Request-Id}. The decode worker
 * streams {@code events} content events one per chunk, {@code pause} apart, then the usage event and
 * {@code [DONE]} — long enough to kill or freeze the service in the middle.
 */
final class VllmFlow implements ClosedLoop.LoopFlow {
  static final String PREFILL_REQUEST = "{\"model\":\"" + Wire.MODEL + "\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
      + "\"max_tokens\":1,\"stream\":false,\"kv_transfer_params\":{\"do_remote_decode\":true}}";
  static final String DECODE_REQUEST = "{\"model\":\"" + Wire.MODEL + "\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
      + "\"stream\":true,\"stream_options\":{\"include_usage\":true},\"kv_transfer_params\":{\"do_remote_prefill\":true}}";

  /**
   * What the client may read: the corrected stream, or — when the service failed open — the worker's.
   * Anything else is broken, or wrong: the stream intact but with numbers that are not the flow's own.
   */
  enum Outcome { CORRECTED, UNCHANGED, WRONG, BROKEN }

  final byte[] original;
  final byte[] corrected;
  private final List<byte[]> chunks;
  private final Duration pause;

  VllmFlow(int events, Duration pause) {
    String wrong = Wire.usage(VllmWorkers.PROMPT, events, (long) VllmWorkers.PROMPT);
    String right = Wire.usage(VllmWorkers.PROMPT, events, (long) VllmWorkers.CACHED);
    String[] contents = new String[events];
    for (int i = 0; i < events; i++) {
      contents[i] = "t" + i;
    }
    String stream = Wire.chatStream(wrong, contents);
    this.original = stream.getBytes(StandardCharsets.UTF_8);
    this.corrected = stream.replace(wrong, right).getBytes(StandardCharsets.UTF_8);
    this.chunks = new ArrayList<>();
    for (String event : stream.split("(?<=\n\n)")) {
      chunks.add(event.getBytes(StandardCharsets.UTF_8));
    }
    this.pause = pause;
  }

  /** Makes the stack's workers answer this flow. */
  VllmFlow install(Stack stack) {
    return install(stack.context, stack.generation);
  }

  /** Makes these workers answer this flow, whoever routes to them. */
  VllmFlow install(Worker context, Worker generation) {
    context.answer(VllmWorkers::prefill);
    generation.answer(request -> decodeReply());
    return this;
  }

  /** The decode worker's answer: the stream in its chunks, {@code pause} apart. */
  Worker.Reply decodeReply() {
    return new Worker.Reply(200, "text/event-stream", chunks, pause, Duration.ZERO);
  }

  /** The prefill leg, as the proxy sends it. */
  static Answer prefill(Stack stack, String requestId) {
    return Orchestrator.postAndWait(stack.envoy.contextUrl("/v1/chat/completions"), Map.of("x-request-id", requestId),
        PREFILL_REQUEST.getBytes(StandardCharsets.UTF_8));
  }

  /** The decode leg. */
  static Answer decode(Stack stack, String requestId) {
    return Orchestrator.postAndWait(stack.envoy.generationUrl("/v1/chat/completions"), Map.of("x-request-id", requestId),
        DECODE_REQUEST.getBytes(StandardCharsets.UTF_8));
  }

  /**
   * A chat-completions pair through the stack's Envoy, whatever its workers answer: the prefill leg
   * (JSON), then the decode leg under the same request id, streamed or not; both must answer 200. The
   * decode answer's body.
   */
  static String chatPair(Stack stack, String requestId, boolean stream) {
    String decode = "{\"model\":\"" + Wire.MODEL + "\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
        + "\"stream\":" + stream + (stream ? ",\"stream_options\":{\"include_usage\":true}" : "")
        + ",\"kv_transfer_params\":{\"do_remote_prefill\":true}}";
    Answer prefill = prefill(stack, requestId);
    if (prefill.status() != 200) {
      throw new AssertionError("prefill leg answered " + prefill.status());
    }
    Answer answer = Orchestrator.postAndWait(stack.envoy.generationUrl("/v1/chat/completions"),
        Map.of("x-request-id", requestId), decode.getBytes(StandardCharsets.UTF_8));
    String body = new String(answer.body(), StandardCharsets.UTF_8);
    if (answer.status() != 200) {
      throw new AssertionError("decode leg answered " + answer.status() + ": " + body);
    }
    return body;
  }

  @Override
  public Outcome run(Stack stack, String requestId) {
    return judge(runLegs(stack, requestId));
  }

  /** Both legs; the decode answer. */
  Answer runLegs(Stack stack, String requestId) {
    Answer prefill = prefill(stack, requestId);
    if (prefill.status() != 200) {
      throw new AssertionError("prefill leg answered " + prefill.status());
    }
    return decode(stack, requestId);
  }

  Outcome judge(Answer answer) {
    if (answer.status() != 200) {
      return Outcome.BROKEN;
    }
    if (java.util.Arrays.equals(answer.body(), corrected)) {
      return Outcome.CORRECTED;
    }
    return java.util.Arrays.equals(answer.body(), original) ? Outcome.UNCHANGED : Outcome.BROKEN;
  }
}
