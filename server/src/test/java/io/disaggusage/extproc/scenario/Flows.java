package io.disaggusage.extproc.scenario;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.testkit.EngineRequests;
import io.disaggusage.extproc.driver.Chunking;
import io.disaggusage.extproc.emulator.envoy.DisaggFlows;
import io.disaggusage.extproc.emulator.envoy.EnvoyStats;
import io.disaggusage.extproc.emulator.envoy.Exchange;
import io.disaggusage.extproc.emulator.envoy.ExchangeHandle;
import io.disaggusage.extproc.emulator.envoy.ExchangeResult;
import io.disaggusage.extproc.emulator.envoy.FakeEnvoy;

/**
 * The orchestrator's two calls through the fake Envoy, in the orders engines use (behaviour.md §4): the
 * scenario suite's names for {@link DisaggFlows}, plus the clean-exchange assertion.
 */
public final class Flows {
  private Flows() {}

  // Every flow is recorded in the ExchangeLedger, for the ExchangeInvariants checked after each test.

  /** {@link DisaggFlows#run}. */
  public static ExchangeResult run(FakeEnvoy envoy, Exchange.Builder exchange) {
    return ExchangeLedger.record(envoy, DisaggFlows.run(envoy, exchange));
  }

  /** {@link DisaggFlows#contextFirst(FakeEnvoy, Exchange.Builder, Exchange.Builder)}. */
  public static ExchangeResult[] contextFirst(FakeEnvoy envoy, Exchange.Builder ctx, Exchange.Builder gen) {
    return recorded(envoy, envoy, DisaggFlows.contextFirst(envoy, ctx, gen));
  }

  /** {@link DisaggFlows#contextFirst(FakeEnvoy, Exchange.Builder, FakeEnvoy, Exchange.Builder)}. */
  public static ExchangeResult[] contextFirst(
      FakeEnvoy ctxEnvoy, Exchange.Builder ctx, FakeEnvoy genEnvoy, Exchange.Builder gen) {
    return recorded(ctxEnvoy, genEnvoy, DisaggFlows.contextFirst(ctxEnvoy, ctx, genEnvoy, gen));
  }

  /** {@link DisaggFlows#generationFirst(FakeEnvoy, Exchange.Builder, Exchange.Builder)}. */
  public static ExchangeResult[] generationFirst(FakeEnvoy envoy, Exchange.Builder ctx, Exchange.Builder gen) {
    return recorded(envoy, envoy, DisaggFlows.generationFirst(envoy, ctx, gen));
  }

  /** {@link DisaggFlows#generationFirst(FakeEnvoy, Exchange.Builder, FakeEnvoy, Exchange.Builder)}. */
  public static ExchangeResult[] generationFirst(
      FakeEnvoy ctxEnvoy, Exchange.Builder ctx, FakeEnvoy genEnvoy, Exchange.Builder gen) {
    return recorded(ctxEnvoy, genEnvoy, DisaggFlows.generationFirst(ctxEnvoy, ctx, genEnvoy, gen));
  }

  /** An exchange run through an {@link io.disaggusage.extproc.emulator.envoy.ExchangeHandle}, recorded like the others. */
  public static ExchangeResult recorded(FakeEnvoy envoy, ExchangeResult r) {
    return ExchangeLedger.record(envoy, r);
  }

  /** A value of the service's dynamic metadata as Envoy's access log prints it; null where unset. */
  public static String metadata(ExchangeResult r, String key) {
    return LegSeen.of(r).metadata(key);
  }

  /**
   * {@link DisaggFlows#generationFirst(FakeEnvoy, Exchange.Builder, FakeEnvoy, Exchange.Builder, java.time.Duration)}:
   * the context leg's response {@code lag} after the generation's.
   */
  public static ExchangeResult[] generationFirst(
      FakeEnvoy ctxEnvoy, Exchange.Builder ctx, FakeEnvoy genEnvoy, Exchange.Builder gen, java.time.Duration lag) {
    return recorded(ctxEnvoy, genEnvoy, DisaggFlows.generationFirst(ctxEnvoy, ctx, genEnvoy, gen, lag));
  }

  /**
   * Starts {@code gen} as a concurrent generation leg ({@code x-disagg-order: concurrent}) and lets its
   * whole response body go once its headers are through: the caller watches what reaches the client
   * while the service waits for the context leg, then records the result with {@link #recorded}.
   */
  public static ExchangeHandle startConcurrent(FakeEnvoy envoy, Exchange.Builder gen) {
    ExchangeHandle h = envoy.start(gen.requestHeader("x-disagg-order", "concurrent").gateResponseBody().build());
    h.awaitResponseHeadersForwarded();
    h.releaseResponseBody();
    return h;
  }

  /** {context, generation} of a two-leg flow, both recorded. */
  private static ExchangeResult[] recorded(FakeEnvoy ctxEnvoy, FakeEnvoy genEnvoy, ExchangeResult[] r) {
    ExchangeLedger.record(ctxEnvoy, r[0]);
    ExchangeLedger.record(genEnvoy, r[1]);
    return r;
  }

  /** A context leg on {@code /v1/chat/completions}: a JSON answer with its content-length, cut in 33-byte messages. */
  public static Exchange.Builder ctxExchange(String requestBody, String responseBody) {
    return Exchange.post(EngineRequests.PATH, requestBody)
        .responseHeader("content-type", "application/json")
        .responseBody(responseBody)
        .responseContentLength()
        .responseChunking(Chunking.fixed(33));
  }

  /**
   * A vLLM context leg on {@code /v1/chat/completions} ({@code do_remote_decode}) named by its {@code
   * x-request-id}: a JSON answer without content-length, chunked as Envoy's default does.
   */
  public static Exchange.Builder ctx(String requestId, String responseBody) {
    return Exchange.post(EngineRequests.PATH, "{\"kv_transfer_params\":{\"do_remote_decode\":true}}")
        .requestHeader("x-request-id", requestId)
        .responseHeader("content-type", "application/json")
        .responseBody(responseBody);
  }

  /**
   * The vLLM generation leg of {@link #ctx} ({@code do_remote_prefill}) under the same {@code x-request-id}:
   * the worker's answer of {@code contentType}, without content-length.
   */
  public static Exchange.Builder gen(String requestId, String contentType, String responseBody) {
    return Exchange.post(EngineRequests.PATH, "{\"kv_transfer_params\":{\"do_remote_prefill\":true}}")
        .requestHeader("x-request-id", requestId)
        .responseHeader("content-type", contentType)
        .responseBody(responseBody);
  }

  /** A generation leg on {@code /v1/chat/completions}, its response with its content-length, cut as given. */
  public static Exchange.Builder genExchange(String requestBody, String contentType, String responseBody, Chunking chunking) {
    return Exchange.post(EngineRequests.PATH, requestBody)
        .responseHeader("content-type", contentType)
        .responseBody(responseBody)
        .responseContentLength()
        .responseChunking(chunking);
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
