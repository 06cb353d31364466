package io.disaggusage.extproc.scenario;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.simulation.envoy.EnvoyStats;
import io.disaggusage.extproc.simulation.envoy.Exchange;
import io.disaggusage.extproc.simulation.envoy.ExchangeHandle;
import io.disaggusage.extproc.simulation.envoy.ExchangeResult;
import io.disaggusage.extproc.simulation.envoy.FakeEnvoy;

/** The orchestrator's two calls through the fake Envoy, in the orders engines use (behaviour.md §4). */
public final class Flows {
  private Flows() {}

  /**
   * One exchange whose bodies reach Envoy only after the headers were answered, so Envoy sends each
   * chunk as its own message (as with a real upstream that streams).
   */
  public static ExchangeResult run(FakeEnvoy envoy, Exchange.Builder exchange) {
    ExchangeHandle h = envoy.start(exchange.gateRequestBody().gateResponseBody().build());
    h.awaitRequestHeadersForwarded();
    h.releaseRequestBody();
    h.awaitResponseHeadersForwarded();
    h.releaseResponseBody();
    return h.awaitResult();
  }

  /** Context-first: the context response has fully passed before the generation request starts. */
  public static ExchangeResult[] contextFirst(FakeEnvoy envoy, Exchange.Builder ctx, Exchange.Builder gen) {
    ExchangeResult c = run(envoy, ctx);
    ExchangeResult g = run(envoy, gen);
    return new ExchangeResult[] {c, g};
  }

  /**
   * Generation-first: the generation response, usage event and end of stream included, reaches
   * Envoy before the context response body does.
   */
  public static ExchangeResult[] generationFirst(FakeEnvoy envoy, Exchange.Builder ctx, Exchange.Builder gen) {
    return generationFirst(envoy, ctx, envoy, gen);
  }

  /**
   * Generation-first with the two legs through different Envoys (hence different service replicas): the
   * context exchange through {@code ctxEnvoy}, the generation exchange through {@code genEnvoy}.
   */
  public static ExchangeResult[] generationFirst(
      FakeEnvoy ctxEnvoy, Exchange.Builder ctx, FakeEnvoy genEnvoy, Exchange.Builder gen) {
    ExchangeHandle g = genEnvoy.start(gen.gateRequestBody().gateResponseBody().build());
    g.awaitRequestHeadersForwarded();
    g.releaseRequestBody();
    ExchangeHandle c = ctxEnvoy.start(ctx.gateRequestBody().gateResponseBody().build());
    c.awaitRequestHeadersForwarded();
    c.releaseRequestBody();
    g.awaitResponseHeadersForwarded();
    g.releaseResponseBody();
    // The generation's last body message has been sent before the context body is released.
    awaitEndOfResponseSent(g);
    c.awaitResponseHeadersForwarded();
    c.releaseResponseBody();
    ExchangeResult cr = c.awaitResult();
    ExchangeResult gr = g.awaitResult();
    return new ExchangeResult[] {cr, gr};
  }

  private static void awaitEndOfResponseSent(ExchangeHandle h) {
    long deadline = System.nanoTime() + 10_000_000_000L;
    while (h.messagesSentSoFar().stream()
        .noneMatch(m -> m.hasResponseBody() && m.getResponseBody().getEndOfStream())) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("generation response never ended");
      }
      Thread.onSpinWait();
      try {
        Thread.sleep(1);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new AssertionError(e);
      }
    }
  }

  /** What every exchange through the service must satisfy: the client never sees our failure. */
  public static void assertClean(ExchangeResult r) {
    assertThat(r.clientResponse().reset()).as("downstream reset").isFalse();
    assertThat(r.clientResponse().localReply()).as("local reply").isEmpty();
    assertThat(r.contentLengthMismatch()).as("content-length mismatch").isFalse();
    assertThat(r.stats().get(EnvoyStats.MESSAGE_TIMEOUTS)).as("message timeouts").isZero();
    assertThat(r.stats().get(EnvoyStats.SPURIOUS_MSGS_RECEIVED)).as("spurious").isZero();
    assertThat(r.stats().get(EnvoyStats.FAILURE_MODE_ALLOWED)).as("fail-open").isZero();
  }
}
