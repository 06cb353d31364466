package io.disaggusage.e2e;

import io.disaggusage.extproc.testkit.AccessLogLine;
import io.disaggusage.e2e.PodLocalBootstrap.Pod;
import io.disaggusage.e2e.PodLocalBootstrap.Role;
import io.disaggusage.extproc.testkit.Wire;
import io.disaggusage.extproc.emulator.engines.UsageVariant;
import io.disaggusage.extproc.emulator.workers.EngineKind;
import io.disaggusage.extproc.emulator.workers.EngineWorker;
import io.disaggusage.extproc.emulator.workers.WorkerRole;
import io.disaggusage.extproc.emulator.workers.WorkerSpec;
import java.net.URI;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * llm-d laid out as {@code deploy/kubernetes/overlays/pod-local/llm-d-decode.yaml} ships it, each pod a
 * loopback address:
 * <ul>
 *   <li>the decode pod ({@link #DECODE_POD}): pd-sidecar serves the pod's port; its decoder is
 *       {@code localhost:--vllm-port}, the pod's Envoy on the shipped {@code decode.yaml}, which forwards
 *       ({@code decode_local}) to the vLLM decode worker on the pod's loopback. Within a pod "localhost"
 *       is the pod's own loopback; here it is 127.0.0.1, so the decode Envoy and worker listen there;
 *   <li>prefill pods ({@link #PREFILL_PODS}): the shipped {@code prefill.yaml} Envoy on the pod's
 *       address in front of a vLLM prefill worker ({@code prefill_local}); a request names one in
 *       {@code x-prefiller-host-port}, as llm-d's EPP does.
 * </ul>
 * One service, classifying by those cluster names, serves every Envoy. The decode worker has the NIXL
 * usage bug (it reports {@code prompt_tokens - 1} cached).
 */
final class LlmdDeployment implements AutoCloseable {
  static final String DECODE_POD = "127.0.0.4";
  static final List<String> PREFILL_PODS = List.of("127.0.0.2", "127.0.0.3");
  /** The pod's localhost, where pd-sidecar sends the decode leg. */
  static final String POD_LOOPBACK = "127.0.0.1";

  /** A prefill pod: its worker, its Envoy (null for {@link #direct}), and the {@code host:port} the EPP names it by. */
  record PrefillPod(EngineWorker worker, EnvoyProcess envoy, String hostPort) {}

  final List<PrefillPod> prefills = new ArrayList<>();
  EngineWorker decode;
  /** Null for {@link #direct}, as is {@link #service}. */
  EnvoyProcess decodeEnvoy;
  ServiceProcess service;
  RouterProcess sidecar;
  private final List<AutoCloseable> children = new ArrayList<>();

  private LlmdDeployment() {}

  /**
   * Starts {@code prefillPods} prefill pods and the decode pod with Envoy {@code release}; the service with
   * {@code serviceArgs} besides the pod-local classification.
   */
  static LlmdDeployment start(String name, String release, int prefillPods, String... serviceArgs) {
    return start(RouterKind.LLMD_PD_SIDECAR, name, release, prefillPods, serviceArgs);
  }

  /** {@link #start(String, String, int, String...)} with pd-sidecar {@code sidecar}: v0.7.1's or llm-d-router v0.10's. */
  static LlmdDeployment start(RouterKind sidecar, String name, String release, int prefillPods, String... serviceArgs) {
    LlmdDeployment d = new LlmdDeployment();
    try {
      d.service = d.started(ServiceProcess.started(name + "-service", PodLocalBootstrap.serviceArgs(serviceArgs)));
      for (int i = 0; i < prefillPods; i++) {
        String address = PREFILL_PODS.get(i);
        EngineWorker worker = d.started(RouterDeployment.worker(
            WorkerSpec.of(EngineKind.VLLM, WorkerRole.PREFILL, address, 0).withModel(Wire.MODEL)));
        Pod pod = Pod.of(Role.PREFILL, address, worker.port(), List.of(d.service.grpcPort()));
        EnvoyProcess envoy = d.started(pod.start(name + "-prefill" + i + "-envoy-" + release, release));
        d.prefills.add(new PrefillPod(worker, envoy, address + ":" + pod.listenerPort()));
      }
      d.decode = d.started(RouterDeployment.worker(WorkerSpec.of(EngineKind.VLLM, WorkerRole.DECODE, POD_LOOPBACK, 0)
          .withModel(Wire.MODEL).withVariant(UsageVariant.BUG).withTokenDelay(Duration.ofMillis(2))));
      Pod decodePod = Pod.of(Role.DECODE, POD_LOOPBACK, d.decode.port(), List.of(d.service.grpcPort()));
      d.decodeEnvoy = d.started(decodePod.start(name + "-decode-envoy-" + release, release));
      for (EnvoyProcess envoy : d.envoys()) {
        envoy.awaitExtProcHealthy(Duration.ofSeconds(30));
      }
      d.sidecar = d.started(RouterProcess.start(name + "-" + sidecar.label(), sidecar, "", 0,
          "http://localhost:" + decodePod.listenerPort()));
      return d;
    } catch (RuntimeException | AssertionError e) {
      d.close();
      throw e;
    }
  }

  /**
   * pd-sidecar straight at a prefill worker (named by its own address) and its decoder on localhost, no
   * Envoy, no service: what pd-sidecar itself sends.
   */
  static LlmdDeployment direct(String name) {
    LlmdDeployment d = new LlmdDeployment();
    try {
      String address = PREFILL_PODS.get(0);
      EngineWorker prefill = d.started(RouterDeployment.worker(
          WorkerSpec.of(EngineKind.VLLM, WorkerRole.PREFILL, address, 0).withModel(Wire.MODEL)));
      d.prefills.add(new PrefillPod(prefill, null, address + ":" + prefill.port()));
      d.decode = d.started(RouterDeployment.worker(WorkerSpec.of(EngineKind.VLLM, WorkerRole.DECODE, POD_LOOPBACK, 0)
          .withModel(Wire.MODEL).withVariant(UsageVariant.BUG)));
      d.sidecar = d.started(RouterProcess.start(name + "-pd-sidecar", RouterKind.LLMD_PD_SIDECAR, "", 0,
          "http://localhost:" + d.decode.port()));
      return d;
    } catch (RuntimeException | AssertionError e) {
      d.close();
      throw e;
    }
  }

  private <T extends AutoCloseable> T started(T child) {
    children.add(0, child);
    return child;
  }

  /** Every pod's Envoy; none for {@link #direct}. */
  List<EnvoyProcess> envoys() {
    List<EnvoyProcess> envoys = new ArrayList<>(prefills.stream().map(PrefillPod::envoy).toList());
    envoys.add(decodeEnvoy);
    envoys.removeIf(java.util.Objects::isNull);
    return envoys;
  }

  /** A path on pd-sidecar at the decode pod's address (it listens on every address of the pod). */
  String url(String path) {
    return "http://" + DECODE_POD + ":" + URI.create(sidecar.url("")).getPort() + path;
  }

  /** The decode Envoy's chat completion lines, in the order they finished. */
  List<AccessLogLine> decodeCompletions() {
    return decodeEnvoy.accessLog().stream()
        .filter(l -> l.path().startsWith("/v1/chat/completions") && Role.DECODE.cluster.equals(l.cluster()))
        .toList();
  }

  /** Waits until {@code count} decode completions are logged and the service counted as many generations. */
  void awaitGenerations(int count) {
    Processes.await(count + " generation exchanges logged and counted", Duration.ofSeconds(10),
        () -> decodeCompletions().size() >= count && ServiceMetrics.generationExchanges(service) >= count);
  }

  /**
   * Envoy's fail-open and discarded-reply ext_proc counters ({@link EnvoyCounters#FAILURES}) that are not
   * zero, per pod listener: a context response Envoy let through before the service answered (its
   * {@code message_timeout}) reaches pd-sidecar before its usage is stored.
   */
  java.util.Map<String, Long> extProcFailures() {
    java.util.Map<String, Long> failures = new java.util.LinkedHashMap<>();
    for (EnvoyProcess envoy : envoys()) {
      for (Role role : Role.values()) {
        String prefix = "http." + role.listener + ".ext_proc.";
        envoy.stats(prefix).forEach((name, value) -> {
          if (value != 0 && EnvoyCounters.FAILURES.contains(name.substring(prefix.length()))) {
            failures.merge(name, value, Long::sum);
          }
        });
      }
    }
    return failures;
  }

  @Override
  public void close() {
    RouterDeployment.closeAll(children);
  }
}
