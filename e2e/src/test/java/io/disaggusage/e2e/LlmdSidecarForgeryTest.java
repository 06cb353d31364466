package io.disaggusage.e2e;

import io.disaggusage.e2e.ForgedInputsThroughRoutersTest.Target;
import io.disaggusage.e2e.LlmdDeployment.PrefillPod;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * {@link ForgedInputsThroughRoutersTest}'s forgeries through llm-d's pd-sidecar in the pod-local topology
 * ({@link LlmdDeployment}, the shipped service settings): the client, standing in for llm-d's gateway and EPP,
 * names the prefill pod in {@code x-prefiller-host-port} and adds what it forges. pd-sidecar clones the client's
 * request for both legs — every header but {@code x-prefiller-host-port}, every body member but
 * {@code kv_transfer_params}, which it writes itself — so the forged headers and {@code disaggregated_params}
 * reach both workers. Each forgery once on a fresh prompt (JSON) and once repeated (SSE), an honest flow beside
 * it: both read their truth, every generation corrected, and an input that could have decided a phase counted
 * refused. Both pd-sidecars the suite has: v0.7.1 (llm-d-inference-scheduler), which merges no usage, and
 * llm-d-router v0.10's, which puts the prefill response's {@code cached_tokens} into the decode's answer.
 */
class LlmdSidecarForgeryTest {
  static Stream<Arguments> sidecars() {
    return Tools.perRelease(List.of(RouterKind.LLMD_PD_SIDECAR, RouterKind.LLMD_ROUTER_PD_SIDECAR));
  }

  @ParameterizedTest(name = "Envoy {0}: {1}")
  @MethodSource("sidecars")
  void noForgedInputMovesTheForgersOrAnyOtherFlowsNumbers(String release, RouterKind sidecar) throws Exception {
    try (LlmdDeployment d = LlmdDeployment.start(sidecar, "forged-" + sidecar.label() + "-" + release, release, 1)) {
      PrefillPod pod = d.prefills.get(0);
      Target target = new Target(d.url("/v1/chat/completions"), LlmdSidecarTest.to(pod), d.service, pod.worker(),
          d.decode, d::decodeCompletions);
      ForgedInputsThroughRoutersTest.runAll(target, sidecar.label() + " (Envoy " + release + ")");
    }
  }
}
