package io.disaggusage.e2e;

import io.disaggusage.e2e.Orchestrator.Answer;
import io.disaggusage.e2e.VllmFlow.Outcome;
import io.disaggusage.extproc.testkit.Wire;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.Map;

/**
 * A vLLM P/D flow whose numbers are its own: the prefill worker's usage (prompt, cached) and the decode
 * worker's completion count follow from the flow's {@code X-Request-Id}, and its prompt names the id
 * too, so a flow corrected with another flow's context usage shows it ({@link Outcome#WRONG}) instead of
 * passing as corrected. The decode worker streams the disaggregation bug: cached == prompt.
 */
final class TruthFlow implements ClosedLoop.LoopFlow {
  private static final Duration PAUSE = Duration.ofMillis(1);
  private static final String[] CONTENTS = {"Par", "is", " the", " capital"};

  /** The counts of one flow. */
  record Truth(long prompt, long cached, long completion) {
    static Truth of(String requestId) {
      int h = requestId.hashCode() & 0x7fffffff;
      long prompt = 64 + h % 4000;
      return new Truth(prompt, (h / 4000) % prompt, 1 + (h / 7) % 200);
    }

    String original() {
      return Wire.chatStream(Wire.usage(prompt, completion, prompt), CONTENTS);
    }

    String corrected() {
      return Wire.chatStream(Wire.usage(prompt, completion, cached), CONTENTS);
    }
  }

  /** Makes the stack's workers answer every flow with its own truth. */
  TruthFlow install(Stack stack) {
    stack.context.answer(request -> {
      Truth truth = Truth.of(request.header("x-request-id"));
      String body = Wire.chatCompletion("p", Wire.usage(truth.prompt(), 1, truth.cached()));
      return Worker.Reply.paced("application/json", bytes(body), 2, PAUSE);
    });
    stack.generation.answer(request -> Worker.Reply.paced(
        "text/event-stream", bytes(Truth.of(request.header("x-request-id")).original()), CONTENTS.length + 2, PAUSE));
    return this;
  }

  private static String request(String requestId, String legFields) {
    return "{\"model\":\"" + Wire.MODEL + "\",\"messages\":[{\"role\":\"user\",\"content\":\"flow " + requestId + "\"}],"
        + legFields + "}";
  }

  @Override
  public Outcome run(Stack stack, String requestId) {
    Map<String, String> headers = Map.of("x-request-id", requestId);
    Answer prefill = Orchestrator.postAndWait(stack.envoy.contextUrl("/v1/chat/completions"), headers,
        bytes(request(requestId, "\"max_tokens\":1,\"stream\":false,\"kv_transfer_params\":{\"do_remote_decode\":true}")));
    if (prefill.status() != 200) {
      return Outcome.BROKEN;
    }
    Answer decode = Orchestrator.postAndWait(stack.envoy.generationUrl("/v1/chat/completions"), headers,
        bytes(request(requestId, "\"stream\":true,\"stream_options\":{\"include_usage\":true},"
            + "\"kv_transfer_params\":{\"do_remote_prefill\":true}")));
    return judge(requestId, decode);
  }

  static Outcome judge(String requestId, Answer answer) {
    if (answer.status() != 200) {
      return Outcome.BROKEN;
    }
    Truth truth = Truth.of(requestId);
    if (Arrays.equals(answer.body(), bytes(truth.corrected()))) {
      return Outcome.CORRECTED;
    }
    if (Arrays.equals(answer.body(), bytes(truth.original()))) {
      return Outcome.UNCHANGED;
    }
    // The same bytes but for the numbers: someone else's counts (or an impossible rewrite).
    String numbersHidden = new String(answer.body(), StandardCharsets.UTF_8).replaceAll("[0-9]+", "#");
    return numbersHidden.equals(truth.original().replaceAll("[0-9]+", "#")) ? Outcome.WRONG : Outcome.BROKEN;
  }

  private static byte[] bytes(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }
}
