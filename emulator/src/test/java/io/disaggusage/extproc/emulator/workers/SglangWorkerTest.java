package io.disaggusage.extproc.emulator.workers;

import static io.disaggusage.extproc.emulator.workers.WorkerCalls.LONG_PROMPT;
import static io.disaggusage.extproc.emulator.workers.WorkerCalls.chat;
import static io.disaggusage.extproc.emulator.workers.WorkerCalls.completion;
import static io.disaggusage.extproc.emulator.workers.WorkerCalls.events;
import static io.disaggusage.extproc.emulator.workers.WorkerCalls.json;
import static io.disaggusage.extproc.emulator.workers.WorkerCalls.post;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.disaggusage.extproc.emulator.engines.UsageVariant;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/** SGLang prefill and decode workers with the bootstrap handover (engines.md §4). */
class SglangWorkerTest extends WorkerPairTest {
  SglangWorkerTest() {
    super(EngineKind.SGLANG);
  }

  private String body(String host, Object room, String extra) {
    return chat(LONG_PROMPT, "\"max_completion_tokens\":4,\"bootstrap_host\":\"" + host + "\",\"bootstrap_port\":"
        + prefill.bootstrapPort().orElseThrow() + ",\"bootstrap_room\":" + room + (extra.isEmpty() ? "" : "," + extra));
  }

  /** Both legs at once, as the router dispatches them; returns {prefill, decode}. */
  private List<HttpResponse<String>> dispatch(String body) throws Exception {
    CompletableFuture<HttpResponse<String>> p = CompletableFuture.supplyAsync(() -> call(prefill, body));
    CompletableFuture<HttpResponse<String>> d = CompletableFuture.supplyAsync(() -> call(decode, body));
    return List.of(p.get(), d.get());
  }

  private static HttpResponse<String> call(EngineWorker worker, String body) {
    try {
      return post(worker, body);
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  @Test
  void decodeTakesThePrefillsCachedCountThroughTheBootstrapRoom() throws Exception {
    start(UsageVariant.FIXED, Duration.ofMillis(300));
    dispatch(body("127.0.0.1", 11, ""));
    List<HttpResponse<String>> legs = dispatch(body("127.0.0.1", 12, ""));
    JsonNode p = json(legs.get(0).body());
    JsonNode d = json(legs.get(1).body());
    assertThat(legs.get(1).statusCode()).isEqualTo(200);
    long prompt = p.path("usage").path("prompt_tokens").asLong();
    long prefillCached = p.path("usage").path("prompt_tokens_details").path("cached_tokens").asLong();
    assertThat(prefillCached).isEqualTo((prompt - 1) / 16 * 16).isPositive();
    assertThat(p.path("usage").path("completion_tokens").asLong()).isEqualTo(1);
    assertThat(d.path("usage").path("completion_tokens").asLong()).isEqualTo(4);
    assertThat(d.path("usage").path("prompt_tokens_details").path("cached_tokens").asLong()).isEqualTo(prefillCached);
    assertThat(d.path("id").asText()).isEqualTo("chatcmpl-" + Long.toHexString(12));
  }

  /** {@code /v1/completions}: the same bootstrap handover, the text_completion shape, no role chunk. */
  @Test
  void completionsTakeThePrefillsCachedCountThroughTheBootstrapRoom() throws Exception {
    start(UsageVariant.FIXED, Duration.ofMillis(300));
    String extra = "\"max_tokens\":4,\"stream\":true,\"stream_options\":{\"include_usage\":true},\"bootstrap_host\":\"127.0.0.1\","
        + "\"bootstrap_port\":" + prefill.bootstrapPort().orElseThrow() + ",\"bootstrap_room\":";
    for (int room = 21; room <= 22; room++) {
      String body = completion(LONG_PROMPT, extra + room);
      CompletableFuture<HttpResponse<String>> p = CompletableFuture.supplyAsync(() -> completionCall(prefill, body));
      List<JsonNode> d = events(completionCall(decode, body).body());
      List<JsonNode> pe = events(p.get().body());
      if (room == 22) {
        long prefillCached = pe.get(pe.size() - 1).path("usage").path("prompt_tokens_details").path("cached_tokens").asLong();
        assertThat(prefillCached).isPositive();
        assertThat(d).allSatisfy(e -> assertThat(e.path("object").asText()).isEqualTo("text_completion"));
        assertThat(d.get(0).path("id").asText()).isEqualTo("cmpl-" + Long.toHexString(22));
        assertThat(d.get(0).path("choices").get(0).path("text").asText()).as("no role chunk").isNotEmpty();
        assertThat(d.get(d.size() - 1).path("usage").path("prompt_tokens_details").path("cached_tokens").asLong()).isEqualTo(prefillCached);
        assertThat(d.get(d.size() - 1).path("usage").path("completion_tokens").asLong()).isEqualTo(4);
      }
    }
  }

  private static HttpResponse<String> completionCall(EngineWorker worker, String body) {
    try {
      return WorkerCalls.postCompletion(worker, body);
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  @Test
  void decodeRadixBugAddsItsOwnHitOnARepeatedPrompt() throws Exception {
    start(UsageVariant.BUG, Duration.ZERO);
    dispatch(body("127.0.0.1", 1, ""));
    List<HttpResponse<String>> legs = dispatch(body("127.0.0.1", 2, ""));
    JsonNode usage = json(legs.get(1).body()).path("usage");
    long prefillCached = json(legs.get(0).body()).path("usage").path("prompt_tokens_details").path("cached_tokens").asLong();
    assertThat(usage.path("prompt_tokens_details").path("cached_tokens").asLong()).isEqualTo(2 * prefillCached);
  }

  @Test
  void decodeFailsWhenBootstrapHostIsNotThePrefillsAddress() throws Exception {
    start(UsageVariant.FIXED, Duration.ZERO);
    List<HttpResponse<String>> legs = dispatch(body("127.0.0.2", 5, ""));
    assertThat(legs.get(0).statusCode()).isEqualTo(200);
    assertThat(legs.get(1).statusCode()).isEqualTo(500);
    assertThat(legs.get(1).headers().firstValue("content-type")).hasValue("application/json");
    assertThat(json(legs.get(1).body()).path("message").asText()).contains("127.0.0.2");
  }

  @Test
  void decodeFailsWhenThePrefillNeverHadTheRoom() throws Exception {
    start(UsageVariant.FIXED, Duration.ZERO);
    post(prefill, body("127.0.0.1", 7, ""));
    HttpResponse<String> response = post(decode, body("127.0.0.1", 8, ""));
    assertThat(response.statusCode()).isEqualTo(500);
    assertThat(json(response.body()).path("message").asText()).contains("room 8");
  }

  @Test
  void nChoicesUseOneRoomEachAndStreamBothLegs() throws Exception {
    start(UsageVariant.FIXED, Duration.ZERO);
    String body = body("127.0.0.1", "[21,22]", "\"n\":2,\"stream\":true,\"stream_options\":{\"include_usage\":true}");
    List<HttpResponse<String>> legs = dispatch(body);
    assertThat(legs.get(1).statusCode()).isEqualTo(200);
    List<JsonNode> p = events(legs.get(0).body());
    List<JsonNode> d = events(legs.get(1).body());
    assertThat(p.get(p.size() - 1).path("usage").path("completion_tokens").asLong()).isEqualTo(2);
    assertThat(d.get(d.size() - 1).path("usage").path("completion_tokens").asLong()).isEqualTo(8);
    assertThat(legs.get(1).body()).endsWith("data: [DONE]\n\n");
    HttpResponse<String> oneRoomMissing = post(decode, body("127.0.0.1", "[23]", "\"n\":2"));
    assertThat(oneRoomMissing.statusCode()).isEqualTo(400);
  }

  /** sglang-router sends host, port and room as arrays of n for n > 1; a wrong host in any fails the request. */
  @Test
  void perChoiceArraysOfHostPortAndRoom() throws Exception {
    start(UsageVariant.FIXED, Duration.ZERO);
    int port = prefill.bootstrapPort().orElseThrow();
    String arrays = "\"n\":2,\"bootstrap_host\":[\"127.0.0.1\",\"127.0.0.1\"],\"bootstrap_port\":[" + port + "," + port + "]";
    List<HttpResponse<String>> legs = dispatch(chat(LONG_PROMPT, arrays + ",\"bootstrap_room\":[31,32]"));
    assertThat(legs.get(1).statusCode()).isEqualTo(200);
    assertThat(json(legs.get(1).body()).path("choices")).hasSize(2);
    String oneWrong = arrays.replace("[\"127.0.0.1\",\"127.0.0.1\"]", "[\"127.0.0.1\",\"127.0.0.2\"]");
    assertThat(dispatch(chat(LONG_PROMPT, oneWrong + ",\"bootstrap_room\":[33,34]")).get(1).statusCode()).isEqualTo(500);
  }
}
