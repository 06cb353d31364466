package io.disaggusage.extproc.emulator.envoy;

import java.time.Duration;

/**
 * An orchestrator's two calls (context, then generation) through a {@link FakeEnvoy}, in the orders
 * disaggregated engines use (behaviour.md §4). Blocks the calling thread only, never a gRPC or harness
 * thread.
 */
public final class DisaggFlows {
  private DisaggFlows() {}

  /**
   * One exchange whose bodies reach Envoy only after the headers were answered, so Envoy sends each
   * chunk as its own message (as with a real upstream that streams).
   */
  public static ExchangeResult run(FakeEnvoy envoy, Exchange.Builder exchange) {
    return start(envoy, exchange).awaitResult();
  }

  /** {@link #run} without waiting for the result. */
  private static ExchangeHandle start(FakeEnvoy envoy, Exchange.Builder exchange) {
    ExchangeHandle h = envoy.start(exchange.gateRequestBody().gateResponseBody().build());
    h.awaitRequestHeadersForwarded();
    h.releaseRequestBody();
    h.awaitResponseHeadersForwarded();
    h.releaseResponseBody();
    return h;
  }

  /**
   * Context-first: the generation request starts once the orchestrator has read the whole context
   * response. With a content-length that is when its last byte arrived, which can be before Envoy ends
   * the stream (the end of the body is often a message of its own), as with a real HTTP/1.1 client.
   *
   * @return the context result, then the generation result
   */
  public static ExchangeResult[] contextFirst(FakeEnvoy envoy, Exchange.Builder ctx, Exchange.Builder gen) {
    return contextFirst(envoy, ctx, envoy, gen);
  }

  /**
   * Context-first with the two legs through different Envoys (hence possibly different service
   * replicas).
   */
  public static ExchangeResult[] contextFirst(
      FakeEnvoy ctxEnvoy, Exchange.Builder ctx, FakeEnvoy genEnvoy, Exchange.Builder gen) {
    ExchangeHandle c = start(ctxEnvoy, ctx);
    c.awaitResponseRead();
    ExchangeResult g = run(genEnvoy, gen);
    return new ExchangeResult[] {c.awaitResult(), g};
  }

  /**
   * Generation-first: the generation response, usage event and end of stream included, reaches Envoy
   * before the context response body does.
   *
   * @return the context result, then the generation result
   */
  public static ExchangeResult[] generationFirst(FakeEnvoy envoy, Exchange.Builder ctx, Exchange.Builder gen) {
    return generationFirst(envoy, ctx, envoy, gen);
  }

  /**
   * Generation-first with the two legs through different Envoys (hence possibly different service
   * replicas): the context exchange through {@code ctxEnvoy}, the generation exchange through
   * {@code genEnvoy}.
   */
  public static ExchangeResult[] generationFirst(
      FakeEnvoy ctxEnvoy, Exchange.Builder ctx, FakeEnvoy genEnvoy, Exchange.Builder gen) {
    return generationFirst(ctxEnvoy, ctx, genEnvoy, gen, Duration.ZERO);
  }

  /**
   * Generation-first where the context response body reaches Envoy {@code contextLag} after the
   * generation's last body message was sent (a prefill that takes longer than Envoy's message timeout,
   * for one).
   */
  public static ExchangeResult[] generationFirst(
      FakeEnvoy ctxEnvoy, Exchange.Builder ctx, FakeEnvoy genEnvoy, Exchange.Builder gen, Duration contextLag) {
    ExchangeHandle g = genEnvoy.start(gen.gateRequestBody().gateResponseBody().build());
    g.awaitRequestHeadersForwarded();
    g.releaseRequestBody();
    ExchangeHandle c = ctxEnvoy.start(ctx.gateRequestBody().gateResponseBody().build());
    c.awaitRequestHeadersForwarded();
    c.releaseRequestBody();
    g.awaitResponseHeadersForwarded();
    g.releaseResponseBody();
    // The generation's last body message has been sent before the context body is released.
    g.awaitResponseEndSent();
    pause(contextLag);
    c.awaitResponseHeadersForwarded();
    c.releaseResponseBody();
    ExchangeResult cr = c.awaitResult();
    ExchangeResult gr = g.awaitResult();
    return new ExchangeResult[] {cr, gr};
  }

  private static void pause(Duration d) {
    try {
      Thread.sleep(d.toMillis());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted", e);
    }
  }
}
