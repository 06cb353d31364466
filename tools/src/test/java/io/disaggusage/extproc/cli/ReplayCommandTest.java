package io.disaggusage.extproc.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.config.ConfigLoader;
import io.disaggusage.extproc.runtime.ServerRuntime;
import io.disaggusage.extproc.testkit.Wire;
import io.disaggusage.extproc.emulator.engines.ScheduleOrder;
import io.disaggusage.extproc.tools.replay.ReplayFixtures;
import io.disaggusage.extproc.tools.replay.ReplayFixtures.Capture;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code replay} on captured exchanges in every input form, against the in-process service and a
 * running one, and what it says about inputs it cannot use.
 */
class ReplayCommandTest {
  @TempDir Path dir;

  @AfterEach
  void restoreLogging() {
    CommandRun.restoreLogging();
  }

  /** A longer message timeout than the shipped 200 ms: the build machine is shared and can stall. */
  static CommandRun replay(String... args) {
    List<String> all = new ArrayList<>(List.of("replay", "--message-timeout", "2s"));
    all.addAll(List.of(args));
    return CommandRun.run(all.toArray(String[]::new));
  }

  static List<String> bodyFiles(Capture c) {
    return List.of(
        "--context-request", c.contextRequest().toString(), "--context-response", c.contextResponse().toString(),
        "--generation-request", c.generationRequest().toString(), "--generation-response", c.generationResponse().toString());
  }

  static String[] args(List<String> first, String... more) {
    List<String> all = new ArrayList<>(first);
    all.addAll(List.of(more));
    return all.toArray(String[]::new);
  }

  static void assertRewritten(CommandRun run, Capture c) {
    assertThat(run.exitCode()).as(run.out() + run.err()).isZero();
    String expected = c.expectedClientBody();
    assertThat(run.out())
        .startsWith(
            "=== generation response body as the client gets it ("
                + expected.getBytes(StandardCharsets.UTF_8).length + " bytes) ===\n" + expected)
        .contains("=== dynamic metadata ===\n{\n  \"disagg_usage\" : {\n")
        .contains("\"outcome\" : \"rewritten\"", "\"corrected\" : true")
        .contains("\"cached_tokens\" : " + c.context().truth().cached() + ",")
        .contains("\"reported_cached_tokens\" : " + c.reportedCached() + ",")
        .endsWith(
            "=== outcome ===\nrewritten: cached_tokens " + c.reportedCached() + " -> " + c.context().truth().cached()
                + ", prompt_tokens " + c.context().truth().prompt() + ", completion_tokens 12, total_tokens "
                + (c.context().truth().prompt() + 12) + "\n");
    assertThat(c.context().truth().cached()).isPositive();
  }

  @Test
  void bodyFilesAloneContextFirstStream() throws Exception {
    Capture c = ReplayFixtures.tensorRtLlm(dir, ScheduleOrder.CONTEXT_FIRST, true);
    assertRewritten(replay(args(bodyFiles(c))), c);
  }

  @Test
  void generationFirstJson() throws Exception {
    Capture c = ReplayFixtures.tensorRtLlm(dir, ScheduleOrder.GENERATION_FIRST, false);
    assertRewritten(replay(args(bodyFiles(c), "--generation-first")), c);
  }

  @Test
  void contextFirstTrafficReplayedGenerationFirstIsNotCorrectedAndSaysWhy() throws Exception {
    Capture c = ReplayFixtures.tensorRtLlm(dir, ScheduleOrder.CONTEXT_FIRST, false);
    CommandRun run = replay(args(bodyFiles(c), "--generation-first"));
    assertThat(run.exitCode()).isEqualTo(ReplayCommand.EXIT_UNEXPECTED_OUTCOME);
    assertThat(run.out())
        .contains(c.generation().bodyUtf8())
        .endsWith("=== outcome ===\npassthrough_no_context: no context usage for this generation exchange: check that"
            + " the context leg is classified as context and that both legs carry the same correlation key;"
            + " body unchanged\n");
  }

  @Test
  void vllmLegsJoinByTheirKvTransferWithoutHeaderFilesAndByTheRequestIdWithThem() throws Exception {
    Capture c = ReplayFixtures.vllm(dir, true);
    // The decode request carries the prefill response's remote_request_id back: that joins the legs.
    assertRewritten(replay(args(bodyFiles(c))), c);
    CommandRun run =
        replay(args(bodyFiles(c),
            "--context-request-headers", c.requestHeaders("context").toString(),
            "--generation-request-headers", c.requestHeaders("generation").toString()));
    assertRewritten(run, c);
  }

  @Test
  void theExpectedOutcomeCanBeAPassThrough() throws Exception {
    Capture c = ReplayFixtures.tensorRtLlm(dir, ScheduleOrder.CONTEXT_FIRST, false);
    assertThat(replay(args(bodyFiles(c), "--generation-first", "--expect", "passthrough_no_context")).exitCode())
        .isZero();
  }

  @Test
  void curlDumpHeadersWithStartLinesHostAndHopByHopHeaders() throws Exception {
    Capture c = ReplayFixtures.vllm(dir, true);
    String id = c.generationCall().headers().get("x-request-id");
    Path ctxHeaders = Files.writeString(dir.resolve("ctx.h"),
        "POST /v1/chat/completions HTTP/1.1\r\nHost: prefill-0:8000\r\nContent-Type: application/json\r\nX-Request-Id: " + id + "\r\n\r\n");
    Path genHeaders = Files.writeString(dir.resolve("gen.h"),
        "# captured with curl -v\nPOST /v1/chat/completions HTTP/1.1\nHost: decode-0:8000\nConnection: keep-alive\n"
            + "Content-Type: application/json\nX-Request-Id: " + id + "\n");
    Path genResponseHeaders = Files.writeString(dir.resolve("gen-response.h"),
        "HTTP/1.1 200 OK\ncontent-type: text/event-stream; charset=utf-8\ntransfer-encoding: chunked\nserver: uvicorn\n");
    Path ctxResponseHeaders = Files.writeString(dir.resolve("ctx-response.h"),
        ":status: 200\ncontent-type: application/json\ncontent-length: " + c.context().body().length + "\n");
    CommandRun run =
        replay(args(bodyFiles(c),
            "--context-request-headers", ctxHeaders.toString(), "--context-response-headers", ctxResponseHeaders.toString(),
            "--generation-request-headers", genHeaders.toString(), "--generation-response-headers", genResponseHeaders.toString()));
    assertRewritten(run, c);
  }

  @Test
  void harFileWithMarkedLegsAbsoluteUrlsAndBase64Content() throws Exception {
    Capture c = ReplayFixtures.vllm(dir, true);
    String id = c.generationCall().headers().get("x-request-id");
    String har =
        "{\"log\": {\"version\": \"1.2\", \"entries\": ["
            + entry("generation", "http://decode-0:8000/v1/chat/completions", id, c.generationCall().bodyUtf8(),
                "text/event-stream", "\"text\": \"" + Base64.getEncoder().encodeToString(c.generation().body()) + "\", \"encoding\": \"base64\"")
            + ","
            + entry("context", "http://prefill-0:8000/v1/chat/completions", id, c.contextCall().bodyUtf8(),
                "application/json", "\"text\": " + quote(c.context().bodyUtf8()))
            + "]}}";
    Path file = Files.writeString(dir.resolve("capture.har"), har);
    assertRewritten(replay("--har", file.toString()), c);
  }

  @Test
  void harLikeFileWithoutMarkersIsContextThenGeneration() throws Exception {
    Capture c = ReplayFixtures.tensorRtLlm(dir, ScheduleOrder.CONTEXT_FIRST, false);
    String har =
        "{\"entries\": ["
            + "{\"request\": {\"method\": \"POST\", \"url\": \"/v1/chat/completions\", \"postData\": {\"text\": "
            + quote(c.contextCall().bodyUtf8()) + "}}, \"response\": {\"status\": 200, \"headers\": [{\"name\":"
            + " \"content-type\", \"value\": \"application/json\"}], \"content\": {\"text\": " + quote(c.context().bodyUtf8()) + "}}},"
            + "{\"request\": {\"method\": \"POST\", \"url\": \"/v1/chat/completions\", \"postData\": {\"text\": "
            + quote(c.generationCall().bodyUtf8()) + "}}, \"response\": {\"status\": 200, \"headers\": [{\"name\":"
            + " \"content-type\", \"value\": \"application/json\"}], \"content\": {\"text\": " + quote(c.generation().bodyUtf8()) + "}}}"
            + "]}";
    Path file = Files.writeString(dir.resolve("capture.json"), har);
    assertRewritten(replay("--har", file.toString()), c);
  }

  private static String entry(String leg, String url, String requestId, String requestBody, String mimeType, String content)
      throws Exception {
    return "{\"_leg\": \"" + leg + "\", \"request\": {\"method\": \"POST\", \"url\": \"" + url + "\", \"headers\": ["
        + "{\"name\": \":authority\", \"value\": \"ignored\"}, {\"name\": \"content-type\", \"value\": \"application/json\"},"
        + " {\"name\": \"x-request-id\", \"value\": \"" + requestId + "\"}], \"postData\": {\"mimeType\": \"application/json\","
        + " \"text\": " + quote(requestBody) + "}}, \"response\": {\"status\": 200, \"headers\": [{\"name\": \"content-type\","
        + " \"value\": \"" + mimeType + "\"}], \"content\": {\"mimeType\": \"" + mimeType + "\", " + content + "}}}";
  }

  private static String quote(String s) throws Exception {
    return new ObjectMapper().writeValueAsString(s);
  }

  @Test
  void sglangLegsToldApartByClusterNames() throws Exception {
    String body =
        "{\"model\":\"" + Wire.MODEL + "\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stream\":true,"
            + "\"stream_options\":{\"include_usage\":true},\"bootstrap_host\":\"10.1.0.5\",\"bootstrap_port\":8998,"
            + "\"bootstrap_room\":9223372036854775806}";
    String genStream = Wire.chatStream(Wire.usage(300, 20, 300L), "H", "ello");
    Path request = Files.writeString(dir.resolve("request.json"), body);
    Path ctxResponse = Files.writeString(dir.resolve("ctx.sse"), Wire.chatStream(Wire.usage(300, 1, 256L), "H"));
    Path genResponse = Files.writeString(dir.resolve("gen.sse"), genStream);
    CommandRun run =
        replay("--context-request", request.toString(), "--context-response", ctxResponse.toString(),
            "--generation-request", request.toString(), "--generation-response", genResponse.toString(),
            "--generation-first", "--context-cluster", "prefill", "--generation-cluster", "decode",
            "--set", "classification.context_clusters=prefill", "--set", "classification.generation_clusters=decode");
    assertThat(run.exitCode()).as(run.out() + run.err()).isZero();
    assertThat(run.out())
        .contains(genStream.replace("{\"cached_tokens\":300}", "{\"cached_tokens\":256}"))
        .contains("rewritten: cached_tokens 300 -> 256, prompt_tokens 300, completion_tokens 20, total_tokens 320");
  }

  @Test
  void againstARunningServer() throws Exception {
    Capture c = ReplayFixtures.tensorRtLlm(dir, ScheduleOrder.GENERATION_FIRST, true);
    Config config = ConfigLoader.fromYaml("grpc:\n  port: 0\nadmin:\n  port: 0\n");
    try (ServerRuntime runtime = ServerRuntime.start(config)) {
      CommandRun run = replay(args(bodyFiles(c), "--generation-first", "--target", "127.0.0.1:" + runtime.grpcPort()));
      assertRewritten(run, c);
    }
  }

  @Test
  void anUnreachableTargetIsAFailure() throws Exception {
    Capture c = ReplayFixtures.tensorRtLlm(dir, ScheduleOrder.CONTEXT_FIRST, false);
    CommandRun run = replay(args(bodyFiles(c), "--target", "127.0.0.1:1"));
    assertThat(run.exitCode()).isEqualTo(1);
    assertThat(run.err()).contains("replay: cannot connect to 127.0.0.1:1 (plaintext)");
  }

  @Test
  void chunkSizeChunkDelayAndTheExactBodyInAFile() throws Exception {
    Capture c = ReplayFixtures.tensorRtLlm(dir, ScheduleOrder.CONTEXT_FIRST, true);
    Path out = dir.resolve("client.body");
    CommandRun run = replay(args(bodyFiles(c), "--chunk-size", "7", "--chunk-delay", "1ms", "--body-out", out.toString()));
    assertRewritten(run, c);
    assertThat(Files.readString(out)).isEqualTo(c.expectedClientBody());
  }

  @Test
  void aFilterThatDoesNotReceiveTheNamespaceLeavesNoMetadata() throws Exception {
    Capture c = ReplayFixtures.tensorRtLlm(dir, ScheduleOrder.CONTEXT_FIRST, false);
    Path filter = Files.writeString(dir.resolve("envoy.yaml"),
        """
        http_filters:
        - name: envoy.filters.http.ext_proc
          typed_config:
            "@type": type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor
            failure_mode_allow: true
            allow_mode_override: true
            processing_mode: {request_header_mode: SEND, response_header_mode: SEND, request_body_mode: NONE,
                              response_body_mode: NONE, request_trailer_mode: SKIP, response_trailer_mode: SKIP}
            message_timeout: 2s
            max_message_timeout: 3s
            metadata_options: {receiving_namespaces: {untyped: [billing]}}
        """);
    CommandRun run = replay(args(bodyFiles(c), "--envoy-config", filter.toString()));
    assertThat(run.exitCode()).isEqualTo(ReplayCommand.EXIT_UNEXPECTED_OUTCOME);
    assertThat(run.out())
        .contains(c.expectedClientBody())
        .contains("=== dynamic metadata ===\n{ }\n")
        .contains("- (no dynamic metadata in namespace disagg_usage)")
        .contains("body CHANGED");
  }
}
