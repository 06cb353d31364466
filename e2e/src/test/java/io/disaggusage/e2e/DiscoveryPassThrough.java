package io.disaggusage.e2e;

import io.disaggusage.extproc.testkit.AccessLogLine;
import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.emulator.workers.EngineWorker;
import java.net.http.HttpResponse;
import java.util.List;

/**
 * The health and discovery calls a router makes pass through Envoy and the service untouched: the workers
 * received them, Envoy logged them without usage metadata, the service counted each as what it is (phase
 * {@code none}, {@code not_disaggregated}) and none as a context or generation exchange, and the same GET
 * through an Envoy listener returns the worker's own status and bytes.
 */
final class DiscoveryPassThrough {
  private DiscoveryPassThrough() {}

  /** How long a probe the router makes may take to reach a worker. */
  private static final java.time.Duration PROBE_WAIT = java.time.Duration.ofSeconds(15);

  /** The discovery paths whose answers through Envoy are compared with the worker's own. */
  static final List<String> COMPARED = List.of("/health", "/v1/models", "/metrics", "/server_info", "/model_info");

  /** {@code prefillProbes}, {@code decodeProbes}: paths the router called on each worker at start-up. */
  static void assertUntouched(
      RouterDeployment deployment, List<String> prefillProbes, List<String> decodeProbes, int completions) {
    assertProbesPassed(deployment, prefillProbes, decodeProbes);
    ServiceMetrics.assertAllCorrected(deployment.service, completions); // only the completions are generations
    assertThat(ServiceMetrics.exchanges(deployment.service, "context"))
        .containsExactlyEntriesOf(java.util.Map.of("stored", (long) completions));
    assertSameAnswers(deployment, COMPARED);
  }

  /**
   * The probes half of {@link #assertUntouched}, whatever the service made of the completions: the workers
   * received {@code prefillProbes} and {@code decodeProbes}, Envoy logged every non-completion request without
   * usage metadata, the service counted each {@code none}/{@code not_disaggregated}, and a GET of each of {@code compared} through Envoy answers what the worker answers.
   */
  static void assertPassedUntouched(
      RouterDeployment deployment, List<String> prefillProbes, List<String> decodeProbes, List<String> compared) {
    assertProbesPassed(deployment, prefillProbes, decodeProbes);
    assertSameAnswers(deployment, compared);
  }

  private static void assertProbesPassed(RouterDeployment deployment, List<String> prefillProbes, List<String> decodeProbes) {
    // A router polls some paths on a timer of its own (SMG: /loads), not only at start-up: each may come
    // a little after the flows that were sent.
    for (String path : prefillProbes) {
      Processes.await("the prefill worker received " + path, PROBE_WAIT, () -> deployment.prefill.log().probeCount(path) > 0);
    }
    for (String path : decodeProbes) {
      Processes.await("the decode worker received " + path, PROBE_WAIT, () -> deployment.decode.log().probeCount(path) > 0);
    }
    long probesLogged = 0;
    // One Envoy may serve both workers (the central topology): each Envoy's log is read once.
    for (EnvoyProcess envoy : java.util.stream.Stream.of(deployment.prefillEnvoy, deployment.decodeEnvoy).distinct().toList()) {
      List<AccessLogLine> probes = envoy.accessLog().stream().filter(l -> !GenerationLedger.isCompletion(l.path())).toList();
      assertThat(probes)
          .as("the probes Envoy passed carry no usage metadata")
          .isNotEmpty()
          .allSatisfy(line -> assertThat(line.field("usage_outcome")).isEqualTo("-"));
      probesLogged += probes.size();
    }
    // Read after the access logs: every probe logged by then had been counted (at its request headers).
    long logged = probesLogged;
    assertThat(ServiceMetrics.exchanges(deployment.service, "none"))
        .as("each probe is counted as not disaggregated")
        .containsOnlyKeys("not_disaggregated")
        .hasEntrySatisfying("not_disaggregated", n -> assertThat(n).isGreaterThanOrEqualTo(logged));
  }

  private static void assertSameAnswers(RouterDeployment deployment, List<String> compared) {
    for (String path : compared) {
      assertSameAnswer(deployment.prefill, deployment.prefillUrl + path, path);
      assertSameAnswer(deployment.decode, deployment.decodeUrl + path, path);
    }
  }

  private static void assertSameAnswer(EngineWorker worker, String throughEnvoy, String path) {
    HttpResponse<String> direct = Http.get(worker.url().resolve(path).toString());
    HttpResponse<String> proxied = Http.get(throughEnvoy);
    assertThat(proxied).as(throughEnvoy).isNotNull();
    assertThat(proxied.statusCode()).as(path).isEqualTo(direct.statusCode());
    assertThat(proxied.body()).as(path).isEqualTo(direct.body());
  }
}
