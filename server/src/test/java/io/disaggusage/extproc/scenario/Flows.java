package io.disaggusage.extproc.scenario;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.testkit.EngineRequests;
import io.disaggusage.extproc.driver.Chunking;
import io.disaggusage.extproc.emulator.envoy.DisaggFlows;
import io.disaggusage.extproc.emulator.envoy.EnvoyStats;
import io.disaggusage.extproc.emulator.envoy.Exchange;
import io.disaggusage.extproc.emulator.envoy.ExchangeResult;
import io.disaggusage.extproc.emulator.envoy.FakeEnvoy;

/**
 * The orchestrator's two calls through the fake Envoy, in the orders engines use (behaviour.md §4): the
 * scenario suite's names for {@link DisaggFlows}, plus the clean-exchange assertion.
 */
public final class Flows {
  private Flows() {}

  /** {@link DisaggFlows#run}. */
  public static ExchangeResult run(FakeEnvoy envoy, Exchange.Builder exchange) {
    return DisaggFlows.run(envoy, exchange);
  }

  /** {@link DisaggFlows#contextFirst(FakeEnvoy, Exchange.Builder, Exchange.Builder)}. */
  public static ExchangeResult[] contextFirst(FakeEnvoy envoy, Exchange.Builder ctx, Exchange.Builder gen) {
    return DisaggFlows.contextFirst(envoy, ctx, gen);
  }

  /** {@link DisaggFlows#contextFirst(FakeEnvoy, Exchange.Builder, FakeEnvoy, Exchange.Builder)}. */
  public static ExchangeResult[] contextFirst(
      FakeEnvoy ctxEnvoy, Exchange.Builder ctx, FakeEnvoy genEnvoy, Exchange.Builder gen) {
    return DisaggFlows.contextFirst(ctxEnvoy, ctx, genEnvoy, gen);
  }

  /** {@link DisaggFlows#generationFirst(FakeEnvoy, Exchange.Builder, Exchange.Builder)}. */
  public static ExchangeResult[] generationFirst(FakeEnvoy envoy, Exchange.Builder ctx, Exchange.Builder gen) {
    return DisaggFlows.generationFirst(envoy, ctx, gen);
  }

  /** {@link DisaggFlows#generationFirst(FakeEnvoy, Exchange.Builder, FakeEnvoy, Exchange.Builder)}. */
  public static ExchangeResult[] generationFirst(
      FakeEnvoy ctxEnvoy, Exchange.Builder ctx, FakeEnvoy genEnvoy, Exchange.Builder gen) {
    return DisaggFlows.generationFirst(ctxEnvoy, ctx, genEnvoy, gen);
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
