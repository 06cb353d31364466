package io.disaggusage.extproc.emulator.workers;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.disaggusage.extproc.emulator.engines.OpenAiWire;
import io.disaggusage.extproc.emulator.engines.WorkerReply;
import io.disaggusage.extproc.emulator.engines.WorkerReply.TokenCounts;
import io.disaggusage.extproc.emulator.engines.UsageVariant;
import java.util.Optional;
import java.util.function.Supplier;

/**
 * The health and discovery answers the routers read (real-components.md): {@code /health} and
 * {@code /health_generate} (200, empty), {@code /v1/models} (an OpenAI list), {@code /metrics} (a few
 * Prometheus gauges in the engine's namespace) and, on SGLang workers only, {@code /server_info},
 * {@code /model_info} and their older {@code /get_*} names with the fields SGLang's http_server.py
 * serves. vLLM serves no {@code /get_server_info}: vllm-router then reads {@code /v1/models}.
 */
final class Discovery {
  private final WorkerSpec spec;
  private final int boundPort;
  private final int bootstrapPort;

  Discovery(WorkerSpec spec, int boundPort, int bootstrapPort) {
    this.spec = spec;
    this.boundPort = boundPort;
    this.bootstrapPort = bootstrapPort;
  }

  /** The answer to {@code GET path}, or empty when the engine serves no such path. */
  Optional<WorkerReply> answer(String path) {
    return switch (path) {
      case "/health", "/health_generate" -> Optional.of(reply("text/plain", new byte[0]));
      case "/v1/models" -> Optional.of(json(models()));
      case "/metrics" -> Optional.of(reply("text/plain; version=0.0.4; charset=utf-8", OpenAiWire.utf8(metrics())));
      case "/server_info", "/get_server_info" -> sglangOnly(this::serverInfo);
      case "/model_info", "/get_model_info" -> sglangOnly(this::modelInfo);
      default -> Optional.empty();
    };
  }

  private Optional<WorkerReply> sglangOnly(Supplier<ObjectNode> body) {
    return spec.engine() == EngineKind.SGLANG ? Optional.of(json(body.get())) : Optional.empty();
  }

  private ObjectNode models() {
    ObjectNode list = OpenAiWire.JSON.createObjectNode().put("object", "list");
    ObjectNode model = list.putArray("data").addObject();
    model.put("id", spec.model()).put("object", "model").put("created", OpenAiWire.CREATED).put("owned_by", spec.engine().ownedBy());
    model.put("root", spec.model());
    return list;
  }

  /** SGLang's server arguments (a subset) plus its version, as {@code /server_info} merges them. */
  private ObjectNode serverInfo() {
    ObjectNode info = OpenAiWire.JSON.createObjectNode();
    info.put("model_path", spec.model()).put("tokenizer_path", spec.model()).put("served_model_name", spec.model());
    info.put("host", spec.host()).put("port", boundPort);
    info.put("disaggregation_mode", spec.role() == WorkerRole.PREFILL ? "prefill" : "decode");
    info.put("disaggregation_bootstrap_port", bootstrapPort);
    info.put("enable_cache_report", true);
    info.put("disaggregation_decode_enable_radix_cache", spec.variant() != UsageVariant.FIXED);
    info.put("version", "simulated");
    return info;
  }

  private ObjectNode modelInfo() {
    ObjectNode info = OpenAiWire.JSON.createObjectNode();
    info.put("model_path", spec.model()).put("tokenizer_path", spec.model()).put("is_generation", true);
    info.putNull("preferred_sampling_params");
    info.put("weight_version", "default").put("has_image_understanding", false).put("has_audio_understanding", false);
    return info;
  }

  private String metrics() {
    String prefix = spec.engine().metricPrefix();
    String labels = "{model_name=\"" + spec.model().replace("\\", "\\\\").replace("\"", "\\\"") + "\"}";
    return "# HELP " + prefix + ":num_requests_running Requests running on the worker.\n"
        + "# TYPE " + prefix + ":num_requests_running gauge\n"
        + prefix + ":num_requests_running" + labels + " 0.0\n"
        + "# HELP " + prefix + ":num_requests_waiting Requests waiting on the worker.\n"
        + "# TYPE " + prefix + ":num_requests_waiting gauge\n"
        + prefix + ":num_requests_waiting" + labels + " 0.0\n";
  }

  private static WorkerReply json(ObjectNode body) {
    return reply(OpenAiWire.JSON_TYPE, OpenAiWire.bytes(body));
  }

  private static WorkerReply reply(String contentType, byte[] body) {
    return new WorkerReply(200, contentType, body, TokenCounts.UNKNOWN);
  }
}
