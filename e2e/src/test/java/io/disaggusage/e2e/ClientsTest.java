package io.disaggusage.e2e;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.disaggusage.extproc.testkit.Wire;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * What real clients read: curl with the problem's reproduction and the official OpenAI and Anthropic
 * Python SDKs (chat, completions, Responses, Messages; streaming and not) call a vLLM-style P/D proxy whose
 * worker calls go through real Envoy and the shipped jar. The prefill worker reports 101 prompt tokens,
 * 7 cached; the decode worker claims all 101 cached. Every client must read 7.
 */
class ClientsTest {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Stacks STACKS = new Stacks("clients", 1);
  private static final Map<String, ProxyOrchestrator> PROXIES = new ConcurrentHashMap<>();

  /** The reproduction: a chat completion through the orchestrator, as a user would send it with curl. */
  static final String SEED_REQUEST =
      "{\"model\":\"" + Wire.MODEL + "\",\"messages\":[{\"role\":\"user\",\"content\":\"What is the capital of France?\"}],"
          + "\"max_tokens\":16}";

  static Stream<Arguments> sdkCalls() {
    List<Arguments> calls = new ArrayList<>();
    for (String release : Tools.envoyReleases()) {
      for (String api : List.of("chat", "completions", "responses", "messages")) {
        calls.add(Arguments.of(release, api, false));
        calls.add(Arguments.of(release, api, true));
      }
    }
    return calls.stream();
  }


  static ProxyOrchestrator proxy(String release) {
    Stack stack = STACKS.get(release);
    return PROXIES.computeIfAbsent(release, r -> {
      stack.context.answer(VllmWorkers::prefill);
      stack.generation.answer(VllmWorkers::decode);
      return new ProxyOrchestrator(stack.envoy);
    });
  }

  @AfterAll
  static void stop() {
    PROXIES.values().forEach(ProxyOrchestrator::close);
    PROXIES.clear();
    STACKS.close();
  }

  @ParameterizedTest(name = "Envoy {0}: curl, the reproduction")
  @MethodSource("io.disaggusage.e2e.Tools#releases")
  void curlReadsTheContextWorkersCachedCount(String release) throws Exception {
    String body = run(List.of(Tools.curl().toString(), "-sS", "--fail", proxy(release).baseUrl() + "/v1/chat/completions",
        "-H", "content-type: application/json", "-d", SEED_REQUEST));

    String wrong = Wire.usage(VllmWorkers.PROMPT, VllmWorkers.COMPLETION, (long) VllmWorkers.PROMPT);
    String fixed = Wire.usage(VllmWorkers.PROMPT, VllmWorkers.COMPLETION, (long) VllmWorkers.CACHED);
    assertThat(body).as("only the usage values change").isEqualTo(Wire.chatCompletion("d", wrong).replace(wrong, fixed));
  }

  @ParameterizedTest(name = "Envoy {0}: curl -N, the reproduction streamed")
  @MethodSource("io.disaggusage.e2e.Tools#releases")
  void curlStreamReadsTheContextWorkersCachedCount(String release) throws Exception {
    String body = run(List.of(Tools.curl().toString(), "-sS", "-N", "--fail", proxy(release).baseUrl() + "/v1/chat/completions",
        "-H", "content-type: application/json",
        "-d", SEED_REQUEST.substring(0, SEED_REQUEST.length() - 1) + ",\"stream\":true,\"stream_options\":{\"include_usage\":true}}"));

    String wrong = Wire.usage(VllmWorkers.PROMPT, VllmWorkers.COMPLETION, (long) VllmWorkers.PROMPT);
    String fixed = Wire.usage(VllmWorkers.PROMPT, VllmWorkers.COMPLETION, (long) VllmWorkers.CACHED);
    assertThat(body).isEqualTo(Wire.chatStream(wrong, "Par", "is", " the", " capital").replace(wrong, fixed));
  }

  @ParameterizedTest(name = "Envoy {0}: Python SDK, {1}, stream={2}")
  @MethodSource("sdkCalls")
  void sdkReadsTheContextWorkersCachedCount(String release, String api, boolean stream) throws Exception {
    Path script = Tools.root().resolve("e2e/src/test/resources/clients/sdk_client.py");
    JsonNode usage = JSON.readTree(run(List.of(
        Tools.pythonClients().toString(), script.toString(), proxy(release).baseUrl(), api, Boolean.toString(stream))).trim());

    switch (api) {
      case "messages" -> {
        assertThat(usage.path("input_tokens").asInt()).isEqualTo(VllmWorkers.PROMPT - VllmWorkers.CACHED);
        assertThat(usage.path("cache_read_input_tokens").asInt()).as(usage.toString()).isEqualTo(VllmWorkers.CACHED);
        assertThat(usage.path("output_tokens").asInt()).isEqualTo(VllmWorkers.COMPLETION);
      }
      case "responses" -> {
        assertThat(usage.path("input_tokens").asInt()).isEqualTo(VllmWorkers.PROMPT);
        assertThat(usage.path("input_tokens_details").path("cached_tokens").asInt()).as(usage.toString()).isEqualTo(VllmWorkers.CACHED);
        assertThat(usage.path("output_tokens").asInt()).isEqualTo(VllmWorkers.COMPLETION);
        assertThat(usage.path("total_tokens").asInt()).isEqualTo(VllmWorkers.PROMPT + VllmWorkers.COMPLETION);
      }
      default -> {
        assertThat(usage.path("prompt_tokens").asInt()).isEqualTo(VllmWorkers.PROMPT);
        assertThat(usage.path("prompt_tokens_details").path("cached_tokens").asInt()).as(usage.toString()).isEqualTo(VllmWorkers.CACHED);
        assertThat(usage.path("completion_tokens").asInt()).isEqualTo(VllmWorkers.COMPLETION);
        assertThat(usage.path("total_tokens").asInt()).isEqualTo(VllmWorkers.PROMPT + VllmWorkers.COMPLETION);
      }
    }
  }

  /** Runs a client program; its stdout, or a failure with its stderr (kept in a file, so no pipe fills). */
  static String run(List<String> command) throws IOException, InterruptedException {
    Path stderr = Files.createTempFile(Tools.logs(), "client-", ".stderr");
    Process process = new ProcessBuilder(command).redirectError(stderr.toFile()).start();
    process.getOutputStream().close();
    byte[] out = process.getInputStream().readAllBytes();
    if (!process.waitFor(60, TimeUnit.SECONDS) || process.exitValue() != 0) {
      throw new AssertionError(command.get(0) + " failed: " + Files.readString(stderr));
    }
    Files.delete(stderr);
    return new String(out, StandardCharsets.UTF_8);
  }
}
