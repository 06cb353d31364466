package io.disaggusage.e2e;

import io.disaggusage.extproc.testkit.AccessLogLine;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.e2e.Orchestrator.Answer;
import io.disaggusage.e2e.PodLocalBootstrap.Pod;
import io.disaggusage.e2e.PodLocalBootstrap.Role;
import io.disaggusage.extproc.testkit.ScenarioVectors;
import io.disaggusage.extproc.testkit.ScenarioVectors.Vector;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The pod-local topology with real Envoy: a prefill "pod" at 127.0.0.2 and a decode "pod" at 127.0.0.3,
 * each with an Envoy started from the shipped {@code deploy/envoy/pod-local} bootstrap in front of a
 * worker at the pod's address, and one service that knows the two clusters. An SGLang-shaped pair — the
 * identical body to both pods at once, as sglang-router sends it — is classified by cluster name alone:
 * the service stores the leg the prefill pod's Envoy ({@code prefill_local}) carried as context usage
 * and rewrites the one the decode pod's Envoy ({@code decode_local}) carried, whose access log says
 * {@code rewritten}; the decode response carries the prefill worker's cached tokens. (The service sends
 * dynamic metadata on generation responses only, so the prefill pod's access log shows the cluster and
 * no outcome; the service's own counter shows {@code stored}.)
 */
class PodLocalTopologyTest {
  static final String PREFILL_POD = "127.0.0.2";
  static final String DECODE_POD = "127.0.0.3";

  @ParameterizedTest(name = "Envoy {0}")
  @MethodSource("io.disaggusage.e2e.Tools#releases")
  void prefillAndDecodeEnvoysBesideTheirWorkersClassifyTheIdenticalBodiesByCluster(String release) throws Exception {
    Vector v = ScenarioVectors.all().stream().filter(x -> x.name().equals("sglangIdenticalBodiesByCluster"))
        .findFirst().orElseThrow();
    String name = "podlocal-" + release;
    try (ServiceProcess service = ServiceProcess.started(name + "-service", PodLocalBootstrap.serviceArgs());
        Worker prefillEngine = new Worker(name + "-prefill-engine", InetAddress.getByName(PREFILL_POD));
        Worker decodeEngine = new Worker(name + "-decode-engine", InetAddress.getByName(DECODE_POD))) {
      Pod prefill = Pod.of(Role.PREFILL, PREFILL_POD, prefillEngine.port(), List.of(service.grpcPort()));
      Pod decode = Pod.of(Role.DECODE, DECODE_POD, decodeEngine.port(), List.of(service.grpcPort()));
      try (EnvoyProcess prefillEnvoy = prefill.start(name + "-prefill-envoy", release);
          EnvoyProcess decodeEnvoy = decode.start(name + "-decode-envoy", release)) {
        prefillEnvoy.awaitExtProcHealthy(Duration.ofSeconds(30));
        decodeEnvoy.awaitExtProcHealthy(Duration.ofSeconds(30));
        prefillEngine.answer(request -> VectorFlow.reply(v.context()));
        decodeEngine.answer(request -> VectorFlow.reply(v.generation()));

        // Both legs at once, to the pods' own addresses, as sglang-router dispatches them.
        CompletableFuture<Answer> prefillLeg =
            Orchestrator.post(prefill.url(v.context().path()), v.context().requestHeaders(), v.context().requestBody());
        CompletableFuture<Answer> decodeLeg =
            Orchestrator.post(decode.url(v.generation().path()), v.generation().requestHeaders(), v.generation().requestBody());

        assertThat(prefillLeg.get().text()).as("prefill bytes pass unchanged").isEqualTo(v.context().responseUtf8());
        assertThat(decodeLeg.get().text()).as("decode bytes carry the prefill worker's cached tokens")
            .isEqualTo(new String(v.expectedGeneration(), StandardCharsets.UTF_8));
        assertThat(prefillEngine.received()).singleElement()
            .satisfies(r -> assertThat(r.body()).isEqualTo(decodeEngine.received().get(0).body()));

        assertThat(loggedLine(prefillEnvoy, Role.PREFILL).field("usage_outcome")).as("no metadata on context legs")
            .isEqualTo("-");
        assertThat(exchanges(service, "context", "stored")).as("the prefill pod's leg, stored as context").isEqualTo(1);
        assertThat(loggedLine(decodeEnvoy, Role.DECODE).field("usage_outcome")).isEqualTo("rewritten");
        assertThat(exchanges(service, "generation", "rewritten")).isEqualTo(1);
      }
    }
  }

  /** The pod Envoy's one access log line, which names the pod's role cluster. */
  static AccessLogLine loggedLine(EnvoyProcess envoy, Role role) {
    Processes.await(role + " pod's access log line", Duration.ofSeconds(5), () -> !envoy.accessLog().isEmpty());
    AccessLogLine line = envoy.accessLog().get(0);
    assertThat(envoy.accessLog()).hasSize(1);
    assertThat(line.cluster()).as(line.toString()).isEqualTo(role.cluster);
    return line;
  }

  /** The service's {@code disagg_usage_exchanges_total} for one phase and outcome (0 when absent). */
  static long exchanges(ServiceProcess service, String phase, String outcome) {
    for (String line : Http.body(service.adminUrl("/metrics")).split("\n")) {
      if (line.startsWith("disagg_usage_exchanges_total{") && line.contains("phase=\"" + phase + "\"")
          && line.contains("outcome=\"" + outcome + "\"")) {
        return (long) Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
      }
    }
    return 0;
  }
}
