package io.disaggusage.extproc.scenario;

import io.disaggusage.extproc.driver.Chunking;
import io.disaggusage.extproc.emulator.envoy.Exchange;
import io.disaggusage.extproc.emulator.envoy.ExchangeResult;
import io.disaggusage.extproc.emulator.envoy.FakeEnvoy;
import io.disaggusage.extproc.scenario.VectorRunner.Splits;
import io.disaggusage.extproc.testkit.ScenarioVectors.Leg;
import io.disaggusage.extproc.testkit.ScenarioVectors.Order;
import io.disaggusage.extproc.testkit.ScenarioVectors.Vector;

/** Runs one {@link Vector} through the fake Envoy over gRPC: each leg an {@link Exchange} as the orchestrator sends it. */
final class VectorExchanges {
  private VectorExchanges() {}

  /** One leg with its bodies cut as given; the cluster, when the leg names one, as Envoy's attribute. */
  static Exchange.Builder exchange(Leg leg, Chunking request, Chunking response) {
    Exchange.Builder b =
        Exchange.builder()
            .method("POST")
            .path(leg.path())
            .requestHeader("content-type", "application/json")
            .requestBody(leg.requestBody())
            .requestContentLength()
            .requestChunking(request)
            .responseHeader("content-type", leg.contentType())
            .responseBody(leg.responseBody())
            .responseContentLength()
            .responseChunking(response);
    leg.requestHeaders().forEach(b::requestHeader);
    if (leg.cluster() != null) {
      b.requestAttribute("xds.cluster_name", leg.cluster());
    }
    return b;
  }

  /**
   * Runs {@code v} in its order, the context leg through {@code contextEnvoy} and the generation leg
   * through {@code generationEnvoy}; returns {context, generation}, the context null when carried.
   */
  static ExchangeResult[] run(FakeEnvoy contextEnvoy, FakeEnvoy generationEnvoy, Vector v, Splits splits) {
    Exchange.Builder gen = exchange(v.generation(), splits.generationRequest(), splits.generationResponse());
    if (v.order() == Order.CARRIED) {
      return new ExchangeResult[] {null, Flows.run(generationEnvoy, gen)};
    }
    Exchange.Builder ctx = exchange(v.context(), splits.contextRequest(), splits.contextResponse());
    return v.order() == Order.CONTEXT_FIRST
        ? Flows.contextFirst(contextEnvoy, ctx, generationEnvoy, gen)
        : Flows.generationFirst(contextEnvoy, ctx, generationEnvoy, gen);
  }
}
