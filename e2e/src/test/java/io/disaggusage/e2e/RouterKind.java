package io.disaggusage.e2e;

import java.nio.file.Path;
import java.util.List;

/** The P/D routers the suite runs, each with the command line docs/routers.md documents. */
enum RouterKind {
  /** vllm-project/router 0.1.17: sequential prefill then decode; merges usage itself. */
  VLLM_ROUTER("vllm-router", "/readiness") {
    @Override
    List<String> command(int port, int metricsPort, String prefillUrl, int bootstrapPort, String decodeUrl) {
      return List.of(
          binary().toString(), "--vllm-pd-disaggregation", "--prefill", prefillUrl, "--decode", decodeUrl,
          "--policy", "round_robin", "--host", "127.0.0.1", "--port", Integer.toString(port),
          "--prometheus-host", "127.0.0.1", "--prometheus-port", Integer.toString(metricsPort));
    }

    @Override
    Path binary() {
      return Tools.vllmRouter();
    }
  },
  /** sgl-model-gateway 0.3.2: prefill and decode in parallel with bootstrap fields; usage from the decode. */
  SGLANG_ROUTER("sglang-router", "/readiness") {
    @Override
    List<String> command(int port, int metricsPort, String prefillUrl, int bootstrapPort, String decodeUrl) {
      return List.of(
          binary().toString(), "--pd-disaggregation", "--prefill", prefillUrl, Integer.toString(bootstrapPort),
          "--decode", decodeUrl, "--policy", "random", "--host", "127.0.0.1", "--port", Integer.toString(port),
          "--prometheus-host", "127.0.0.1", "--prometheus-port", Integer.toString(metricsPort));
    }

    @Override
    Path binary() {
      return Tools.sglangRouter();
    }
  },
  /**
   * llm-d's pd-sidecar v0.7.1, the decode pod's P/D proxy: prefill (the pod named per request by
   * {@code x-prefiller-host-port}) then decode, NIXL v2, plain HTTP. Its decoder is always
   * {@code localhost:--vllm-port}, so {@code decodeUrl} must name localhost; it has no prefill URL,
   * bootstrap port or metrics port.
   */
  LLMD_PD_SIDECAR("pd-sidecar", "/health") {
    @Override
    List<String> command(int port, int metricsPort, String prefillUrl, int bootstrapPort, String decodeUrl) {
      java.net.URI decoder = java.net.URI.create(decodeUrl);
      if (!"localhost".equals(decoder.getHost()) && !"127.0.0.1".equals(decoder.getHost())) {
        throw new IllegalArgumentException("pd-sidecar sends the decode leg to localhost only, not " + decodeUrl);
      }
      return List.of(binary().toString(), "--port=" + port, "--vllm-port=" + decoder.getPort(),
          "--kv-connector=nixlv2", "--secure-proxy=false");
    }

    @Override
    Path binary() {
      return Tools.pdSidecar();
    }
  };

  private final String label;
  private final String readinessPath;

  RouterKind(String label, String readinessPath) {
    this.label = label;
    this.readinessPath = readinessPath;
  }

  String label() {
    return label;
  }

  /**
   * The path that answers 200 once the router can route. sglang-router 0.3.2 answers {@code /health} as soon
   * as it listens, while it still registers its workers in the background (a chat request then gets 503,
   * "No prefill workers available"); its {@code /readiness} answers 503 until they are healthy. vllm-router
   * has the same {@code /readiness}; pd-sidecar only {@code /health}.
   */
  String readinessPath() {
    return readinessPath;
  }

  /**
   * The router's command line with its prefill (and SGLang bootstrap port) and decode URLs. Each router
   * also serves Prometheus metrics, on port 29000 unless told otherwise: two routers on one machine then
   * collide, so each gets a free one.
   */
  abstract List<String> command(int port, int metricsPort, String prefillUrl, int bootstrapPort, String decodeUrl);

  abstract Path binary();
}
