package io.disaggusage.extproc.emulator.workers;

import static io.disaggusage.extproc.emulator.workers.WorkerCalls.get;
import static io.disaggusage.extproc.emulator.workers.WorkerCalls.json;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/** The health and discovery endpoints routers call, and the gRPC probes they try first. */
class WorkerDiscoveryTest {

  @Test
  void everyEngineAnswersHealthModelsAndMetricsAndCountsThemApart() throws Exception {
    for (EngineKind kind : EngineKind.values()) {
      try (EngineWorker worker = EngineWorker.start(WorkerSpec.of(kind, WorkerRole.DECODE, "127.0.0.1", 0).withModel("llama"))) {
        HttpResponse<String> health = get(worker, "/health");
        assertThat(health.statusCode()).isEqualTo(200);
        assertThat(health.body()).isEmpty();
        assertThat(get(worker, "/health_generate").statusCode()).isEqualTo(200);
        JsonNode models = json(get(worker, "/v1/models").body());
        assertThat(models.path("object").asText()).isEqualTo("list");
        assertThat(models.path("data").path(0).path("id").asText()).isEqualTo("llama");
        assertThat(models.path("data").path(0).path("object").asText()).isEqualTo("model");
        HttpResponse<String> metrics = get(worker, "/metrics");
        assertThat(metrics.headers().firstValue("content-type").orElseThrow()).startsWith("text/plain; version=0.0.4");
        assertThat(metrics.body()).contains(kind.label() + ":num_requests_running{model_name=\"llama\"} 0.0");
        get(worker, "/health");
        assertThat(worker.log().probeCount("/health")).isEqualTo(2);
        assertThat(worker.log().probeCounts()).containsEntry("/v1/models", 1).containsEntry("/metrics", 1);
        assertThat(worker.log().completions()).isEmpty();
      }
    }
  }

  @Test
  void sglangServesServerAndModelInfoUnderBothNamesAndVllmNoServerInfo() throws Exception {
    try (EngineWorker sglang =
            EngineWorker.start(WorkerSpec.of(EngineKind.SGLANG, WorkerRole.PREFILL, "127.0.0.1", 0).withModel("llama"));
        EngineWorker vllm = EngineWorker.start(WorkerSpec.of(EngineKind.VLLM, WorkerRole.PREFILL, "127.0.0.1", 0))) {
      for (String path : new String[] {"/server_info", "/get_server_info"}) {
        JsonNode info = json(get(sglang, path).body());
        assertThat(info.path("model_path").asText()).isEqualTo("llama");
        assertThat(info.path("disaggregation_mode").asText()).isEqualTo("prefill");
        assertThat(info.path("disaggregation_bootstrap_port").asInt()).isEqualTo(sglang.bootstrapPort().orElseThrow());
      }
      for (String path : new String[] {"/model_info", "/get_model_info"}) {
        JsonNode info = json(get(sglang, path).body());
        assertThat(info.path("model_path").asText()).isEqualTo("llama");
        assertThat(info.path("tokenizer_path").asText()).isEqualTo("llama");
        assertThat(info.path("is_generation").asBoolean()).isTrue();
      }
      HttpResponse<String> missing = get(vllm, "/get_server_info");
      assertThat(missing.statusCode()).isEqualTo(404);
      assertThat(missing.body()).isEqualTo("{\"detail\":\"Not Found\"}");
    }
  }

  /** sglang-router's h2c gRPC health probe must fail fast so it falls back to HTTP. */
  @Test
  void grpcProbesOverH2cAndAPriorKnowledgePrefaceFailFast() throws Exception {
    try (EngineWorker worker = EngineWorker.start(WorkerSpec.of(EngineKind.SGLANG, WorkerRole.DECODE, "127.0.0.1", 0))) {
      String upgrade =
          "POST /sglang.grpc.scheduler.SglangScheduler/HealthCheck HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\n"
              + "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\ncontent-type: application/grpc\r\nte: trailers\r\n"
              + "content-length: 5\r\n\r\n\0\0\0\0\0";
      assertThat(exchange(worker, upgrade)).startsWith("HTTP/1.1 404");
      String preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\4\0\0\0\0\0";
      // the JDK server reads "PRI *" as an HTTP/1.1 request for a path it has no handler for
      assertThat(exchange(worker, preface)).startsWith("HTTP/1.1 404").contains("Connection: close");
      assertThat(worker.log().probeCount("/sglang.grpc.scheduler.SglangScheduler/HealthCheck")).isEqualTo(1);
    }
  }

  /** Writes {@code request} raw and reads what comes back within two seconds. */
  private static String exchange(EngineWorker worker, String request) throws Exception {
    try (Socket socket = new Socket("127.0.0.1", worker.port())) {
      socket.setSoTimeout(2000);
      OutputStream out = socket.getOutputStream();
      out.write(request.getBytes(StandardCharsets.ISO_8859_1));
      out.flush();
      InputStream in = socket.getInputStream();
      ByteArrayOutputStream received = new ByteArrayOutputStream();
      byte[] buffer = new byte[4096];
      try {
        int n = in.read(buffer);
        if (n > 0) {
          received.write(buffer, 0, n);
        }
      } catch (SocketTimeoutException e) {
        return "timed out";
      } catch (java.net.SocketException e) {
        return "closed: " + e.getMessage();
      }
      return received.toString(StandardCharsets.ISO_8859_1);
    }
  }
}
