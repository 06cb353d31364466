package io.disaggusage.e2e;

import java.nio.file.Path;
import java.util.List;

/**
 * The P/D routers the suite runs, each with the command line docs/routers.md documents (SMG: with the modes
 * its tests found, SmgTest).
 */
enum RouterKind {
  /** vllm-project/router 0.1.17: sequential prefill then decode; merges usage itself. */
  VLLM_ROUTER("vllm-router", "/readiness", Tools::vllmRouter) {
    @Override
    List<String> command(int port, int metricsPort, String prefillUrl, int bootstrapPort, String decodeUrl) {
      return listening(List.of(binary().toString(), "--vllm-pd-disaggregation", "--prefill", prefillUrl, "--decode",
          decodeUrl, "--policy", "round_robin"), port, metricsPort);
    }
  },
  /** sgl-model-gateway 0.3.2: prefill and decode in parallel with bootstrap fields; usage from the decode. */
  SGLANG_ROUTER("sglang-router", "/readiness", Tools::sglangRouter) {
    @Override
    List<String> command(int port, int metricsPort, String prefillUrl, int bootstrapPort, String decodeUrl) {
      return listening(List.of(binary().toString(), "--pd-disaggregation", "--prefill", prefillUrl,
          Integer.toString(bootstrapPort), "--decode", decodeUrl, "--policy", "random"), port, metricsPort);
    }
  },
  /**
   * SMG 1.13 (Shepherd Model Gateway, sglang-router's successor) in its SGLang P/D mode ({@code --prefill URL
   * BOOTSTRAP_PORT}): the same body to both workers in parallel with {@code bootstrap_host} (its prefill URL's
   * host), {@code bootstrap_port} and {@code bootstrap_room} (arrays of one per choice for {@code n > 1});
   * usage from the decode.
   */
  SMG_SGLANG("smg", "/readiness", Tools::smg) {
    @Override
    List<String> command(int port, int metricsPort, String prefillUrl, int bootstrapPort, String decodeUrl) {
      return smg(port, metricsPort, "--prefill", prefillUrl, Integer.toString(bootstrapPort), "--decode", decodeUrl,
          "--policy", "random");
    }
  },
  /**
   * SMG with vLLM workers given on its command line without a bootstrap port: no KV connector, so the
   * prefill gets the client's body capped to one token and the decode the client's body, neither with
   * {@code kv_transfer_params} (the legs share nothing; the decode prefills again).
   */
  SMG_VLLM("smg-vllm", "/readiness", Tools::smg) {
    @Override
    List<String> command(int port, int metricsPort, String prefillUrl, int bootstrapPort, String decodeUrl) {
      return smg(port, metricsPort, "--prefill", prefillUrl, "--decode", decodeUrl);
    }
  },
  /**
   * SMG with vLLM workers registered through {@code POST /workers} with {@code kv_connector: NixlConnector}:
   * the prefill tagged {@code do_remote_decode: true}, the {@code kv_transfer_params} it returns relayed to the
   * decode verbatim; sequential.
   */
  SMG_NIXL("smg-nixl", "/readiness", Tools::smg) {
    @Override
    List<String> registrations(String prefillUrl, int bootstrapPort, String decodeUrl) {
      return vllmWorkers("NixlConnector", prefillUrl, decodeUrl, "");
    }
  },
  /**
   * SMG with vLLM workers registered with {@code kv_connector: MooncakeConnector}: SMG mints
   * {@code kv_transfer_params} with one {@code transfer_id} for both legs, and gives the decode the prefill's
   * {@code kv_engine_id} (without one registered for the prefill it sends neither leg any) and bootstrap
   * address; the prefill's own returned parameters are not relayed; sequential.
   */
  SMG_MOONCAKE("smg-mooncake", "/readiness", Tools::smg) {
    @Override
    List<String> registrations(String prefillUrl, int bootstrapPort, String decodeUrl) {
      return vllmWorkers("MooncakeConnector", prefillUrl, decodeUrl, SMG_MOONCAKE_PREFILL_ENGINE);
    }
  },
  /**
   * llm-d's pd-sidecar v0.7.1, the decode pod's P/D proxy: prefill (the pod named per request by
   * {@code x-prefiller-host-port}) then decode, NIXL v2, plain HTTP. Its decoder is always
   * {@code localhost:--vllm-port}, so {@code decodeUrl} must name localhost; it has no prefill URL,
   * bootstrap port or metrics port.
   */
  LLMD_PD_SIDECAR("pd-sidecar", "/health", Tools::pdSidecar) {
    @Override
    List<String> command(int port, int metricsPort, String prefillUrl, int bootstrapPort, String decodeUrl) {
      return List.of(binary().toString(), "--port=" + port, "--vllm-port=" + localhostPort(decodeUrl),
          "--kv-connector=nixlv2", "--secure-proxy=false");
    }
  },
  /**
   * llm-d-router v0.10.0's pd-sidecar, the same proxy moved to llm-d-router: the same flags
   * ({@code --vllm-port} deprecated for {@code --model-server-port}), {@code nixlv2} still the default; it
   * also replaces {@code cached_tokens} in the decode's answer with the prefill response's
   * ({@code cached_tokens_usage_rewriter.go}), so the client reads the prefill's cached count as behind
   * vllm-router. Its decoder is {@code localhost} only, as v0.7.1's.
   */
  LLMD_ROUTER_PD_SIDECAR("llmd-pd-sidecar", "/health", Tools::llmdPdSidecar) {
    @Override
    List<String> command(int port, int metricsPort, String prefillUrl, int bootstrapPort, String decodeUrl) {
      return List.of(binary().toString(), "--port=" + port, "--model-server-port=" + localhostPort(decodeUrl),
          "--kv-connector=nixlv2", "--secure-proxy=false");
    }
  };

  /** The port of a pd-sidecar's decoder, which must be on localhost: pd-sidecar sends the decode leg there only. */
  private static int localhostPort(String decodeUrl) {
    java.net.URI decoder = java.net.URI.create(decodeUrl);
    if (!"localhost".equals(decoder.getHost()) && !"127.0.0.1".equals(decoder.getHost())) {
      throw new IllegalArgumentException("pd-sidecar sends the decode leg to localhost only, not " + decodeUrl);
    }
    return decoder.getPort();
  }

  /** The {@code kv_engine_id} the SMG tests register their Mooncake prefill worker with. */
  static final String SMG_MOONCAKE_PREFILL_ENGINE = "smg-e2e-prefill-engine";

  private final String label;
  private final String readinessPath;
  private final java.util.function.Supplier<Path> binary;

  RouterKind(String label, String readinessPath, java.util.function.Supplier<Path> binary) {
    this.label = label;
    this.readinessPath = readinessPath;
    this.binary = binary;
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
  List<String> command(int port, int metricsPort, String prefillUrl, int bootstrapPort, String decodeUrl) {
    return smg(port, metricsPort); // SMG whose workers are registered through POST /workers (registrations)
  }

  /** The router's executable in {@code .tools/}. */
  Path binary() {
    return binary.get();
  }

  /**
   * The JSON bodies to {@code POST /workers} once the router listens, for a router that takes its workers
   * through its API rather than its command line; none for the others.
   */
  List<String> registrations(String prefillUrl, int bootstrapPort, String decodeUrl) {
    return List.of();
  }

  /**
   * {@code smg launch --pd-disaggregation} on loopback with {@code options}. A test stops it at once: without
   * {@code --shutdown-grace-period-secs 0} SMG takes 7 s to leave after SIGTERM with nothing in flight.
   */
  private static List<String> smg(int port, int metricsPort, String... options) {
    List<String> command = new java.util.ArrayList<>(List.of(Tools.smg().toString(), "launch", "--pd-disaggregation"));
    command.addAll(List.of(options));
    command = listening(command, port, metricsPort);
    command.addAll(List.of("--shutdown-grace-period-secs", "0"));
    return command;
  }

  /**
   * {@code command} with the listening options the three Rust routers (vllm-router, sglang-router, SMG) share:
   * loopback, {@code port}, and their Prometheus endpoint on {@code metricsPort}.
   */
  private static List<String> listening(List<String> command, int port, int metricsPort) {
    List<String> all = new java.util.ArrayList<>(command);
    all.addAll(List.of("--host", "127.0.0.1", "--port", Integer.toString(port), "--prometheus-host", "127.0.0.1",
        "--prometheus-port", Integer.toString(metricsPort)));
    return all;
  }

  /** SMG's registrations of a vLLM prefill and decode worker with {@code connector}; the prefill's engine id if any. */
  private static List<String> vllmWorkers(String connector, String prefillUrl, String decodeUrl, String prefillEngineId) {
    com.fasterxml.jackson.databind.ObjectMapper json = RouterClients.JSON;
    com.fasterxml.jackson.databind.node.ObjectNode prefill = json.createObjectNode().put("url", prefillUrl)
        .put("worker_type", "prefill").put("runtime_type", "vllm").put("kv_connector", connector).put("kv_role", "kv_producer");
    if (!prefillEngineId.isEmpty()) {
      prefill.put("kv_engine_id", prefillEngineId);
    }
    com.fasterxml.jackson.databind.node.ObjectNode decode = json.createObjectNode().put("url", decodeUrl)
        .put("worker_type", "decode").put("runtime_type", "vllm").put("kv_connector", connector).put("kv_role", "kv_consumer");
    return List.of(prefill.toString(), decode.toString());
  }
}
