package io.disaggusage.e2e;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.disaggusage.extproc.testkit.ToyProxy;
import java.util.Map;
import java.util.function.UnaryOperator;

/**
 * vLLM's toy P/D proxy ({@link ToyProxy}, shared with the benchmarks) as the suite builds it: in front of an
 * {@link EnvoyProcess}'s context and generation listeners, or of any two URLs.
 */
final class ProxyOrchestrator extends ToyProxy {
  ProxyOrchestrator(EnvoyProcess envoy) {
    this(envoy, UnaryOperator.identity());
  }

  /** A proxy that passes the prefill's {@code kv_transfer_params} through {@code handoff} on the way to the decode leg. */
  ProxyOrchestrator(EnvoyProcess envoy, UnaryOperator<ObjectNode> handoff) {
    this(envoy::contextUrl, envoy::generationUrl, handoff);
  }

  /** A proxy calling the prefill worker at {@code prefillUrl(path)} and the decode worker at {@code decodeUrl(path)}. */
  ProxyOrchestrator(UnaryOperator<String> prefillUrl, UnaryOperator<String> decodeUrl, UnaryOperator<ObjectNode> handoff) {
    this(prefillUrl, decodeUrl, handoff, false);
  }

  /** A proxy as above; with {@code oneIdPerLeg} the legs share no {@code X-Request-Id} ({@link #decodeRequestId}). */
  ProxyOrchestrator(UnaryOperator<String> prefillUrl, UnaryOperator<String> decodeUrl, UnaryOperator<ObjectNode> handoff,
      boolean oneIdPerLeg) {
    super(prefillUrl, Map.of(), decodeUrl, Map.of(), handoff, oneIdPerLeg);
  }

  /**
   * The toy proxy calling its workers through a hop that routes by headers (a Gateway's HTTPRoute, an Istio
   * proxy's Host-named virtual host); the prefill's params relayed verbatim.
   */
  ProxyOrchestrator(UnaryOperator<String> prefillUrl, Map<String, String> prefillHeaders, UnaryOperator<String> decodeUrl,
      Map<String, String> decodeHeaders) {
    super(prefillUrl, prefillHeaders, decodeUrl, decodeHeaders, UnaryOperator.identity(), false);
  }
}
