package io.disaggusage.extproc.emulator.workers;

import static io.disaggusage.extproc.emulator.workers.WorkerCalls.LONG_PROMPT;
import static org.assertj.core.api.Assertions.assertThat;

import com.openai.client.OpenAIClient;
import com.openai.client.okhttp.OpenAIOkHttpClient;
import com.openai.core.JsonValue;
import com.openai.core.http.StreamResponse;
import com.openai.models.chat.completions.ChatCompletion;
import com.openai.models.chat.completions.ChatCompletionChunk;
import com.openai.models.chat.completions.ChatCompletionCreateParams;
import com.openai.models.chat.completions.ChatCompletionStreamOptions;
import com.openai.models.completions.CompletionUsage;
import io.disaggusage.extproc.emulator.engines.UsageVariant;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/** The official OpenAI Java SDK, as a client, reads what the decode workers send: JSON and SSE. */
class OpenAiSdkParsesWorkersTest {

  private static OpenAIClient client(EngineWorker worker) {
    return OpenAIOkHttpClient.builder().baseUrl(worker.url() + "v1").apiKey("unused").maxRetries(0).build();
  }

  private static ChatCompletionCreateParams.Builder params(Map<String, Object> extra) {
    ChatCompletionCreateParams.Builder builder =
        ChatCompletionCreateParams.builder().model("m").addUserMessage(LONG_PROMPT).maxCompletionTokens(3).n(2);
    extra.forEach((name, value) -> builder.putAdditionalBodyProperty(name, JsonValue.from(value)));
    return builder;
  }

  @Test
  void vllmDecodeJsonAndStreamParse() throws Exception {
    try (EngineWorker decode =
        EngineWorker.start(WorkerSpec.of(EngineKind.VLLM, WorkerRole.DECODE, "127.0.0.1", 0).withVariant(UsageVariant.BUG))) {
      OpenAIClient client = client(decode);
      Map<String, Object> kv = Map.of("kv_transfer_params", Map.of("do_remote_prefill", true));
      ChatCompletion completion = client.chat().completions().create(params(kv).build());
      assertThat(completion.choices()).hasSize(2);
      CompletionUsage usage = completion.usage().orElseThrow();
      assertThat(usage.completionTokens()).isEqualTo(6);
      assertThat(usage.promptTokensDetails().flatMap(d -> d.cachedTokens())).hasValue(usage.promptTokens() - 1);
      ChatCompletionStreamOptions options = ChatCompletionStreamOptions.builder().includeUsage(true).build();
      try (StreamResponse<ChatCompletionChunk> stream =
          client.chat().completions().createStreaming(params(kv).streamOptions(options).build())) {
        List<ChatCompletionChunk> chunks = stream.stream().toList();
        assertThat(chunks.get(chunks.size() - 1).usage().map(CompletionUsage::completionTokens)).hasValue(6L);
      }
    }
  }

  @Test
  void trtLlmGenerationStreamWithItsSpacedFirstEventParses() throws Exception {
    try (EngineWorker generation = EngineWorker.start(WorkerSpec.of(EngineKind.TRTLLM, WorkerRole.DECODE, "127.0.0.1", 0))) {
      Map<String, Object> params =
          Map.of("disaggregated_params", Map.of("request_type", "generation_only", "ctx_request_id", 1, "disagg_request_id", 1));
      ChatCompletionStreamOptions options = ChatCompletionStreamOptions.builder().includeUsage(true).build();
      try (StreamResponse<ChatCompletionChunk> stream =
          client(generation).chat().completions().createStreaming(params(params).streamOptions(options).build())) {
        List<ChatCompletionChunk> chunks = stream.stream().toList();
        assertThat(chunks.get(0).choices().get(0).delta().content()).isPresent();
        Optional<CompletionUsage> usage = chunks.get(chunks.size() - 1).usage();
        assertThat(usage.map(CompletionUsage::completionTokens)).hasValue(6L);
      }
    }
  }
}
