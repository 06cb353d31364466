package io.disaggusage.extproc.emulator.envoy;

import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Predicate;

/**
 * Controls and observes a running exchange started with {@link FakeEnvoy#start(Exchange)}.
 * Release methods open the gates configured on the {@link Exchange}; await methods block the test
 * thread (never a gRPC or harness thread) for at most {@link FakeEnvoy#awaitTimeout()}.
 */
public final class ExchangeHandle {
  private final FilterStream stream;
  private final Duration awaitTimeout;

  ExchangeHandle(FilterStream stream, Duration awaitTimeout) {
    this.stream = stream;
    this.awaitTimeout = awaitTimeout;
  }

  /** Completes when the exchange is over (client response finished, local reply or reset). */
  public CompletableFuture<ExchangeResult> result() {
    return stream.result;
  }

  public ExchangeResult awaitResult() {
    return await(stream.result, "exchange result");
  }

  public ExchangeResult awaitResult(Duration timeout) {
    return await(stream.result, timeout, "exchange result");
  }

  /**
   * Waits until the client has read the whole response: with a content-length, once that many body
   * bytes arrived (an HTTP/1.1 client reads no further, so Envoy's own end of stream can come later);
   * otherwise until the response ends.
   */
  public void awaitResponseRead() {
    await(stream.responseRead, "response read by the client");
  }

  /** Completes with the request headers as the upstream received them. */
  public CompletableFuture<HeaderList> requestHeadersForwarded() {
    return stream.requestHeadersForwarded;
  }

  /** Completes with the response headers as the client received them. */
  public CompletableFuture<HeaderList> responseHeadersForwarded() {
    return stream.responseHeadersForwarded;
  }

  public HeaderList awaitRequestHeadersForwarded() {
    return await(stream.requestHeadersForwarded, "request headers forwarded");
  }

  public HeaderList awaitResponseHeadersForwarded() {
    return await(stream.responseHeadersForwarded, "response headers forwarded");
  }

  /** Completes when the ext_proc gRPC stream has been opened. */
  public CompletableFuture<Void> streamOpened() {
    return stream.streamOpened;
  }

  /** Waits until the client's accumulated body satisfies the condition; returns that body. */
  public byte[] awaitClientBody(Predicate<byte[]> condition) {
    return await(stream.whenClientBody(condition), "client body condition");
  }

  /** Waits until the client's accumulated body contains the text (UTF-8). */
  public String awaitClientBodyContaining(String text) {
    byte[] body = awaitClientBody(b -> new String(b, StandardCharsets.UTF_8).contains(text));
    return new String(body, StandardCharsets.UTF_8);
  }

  /** Waits until at least {@code n} ProcessingRequests were sent; returns all sent so far. */
  public List<ProcessingRequest> awaitMessagesSent(int n) {
    return await(stream.whenMessagesSent(n), n + " messages sent");
  }

  /** Waits until at least {@code n} processor replies have been handled (applied or rejected). */
  public void awaitRepliesHandled(int n) {
    await(stream.whenRepliesHandled(n), n + " replies handled");
  }

  /**
   * Waits until the first {@code n} response body chunks have reached the filter: their codec events
   * ran, so what Envoy does with them (send, buffer, hold) is done.
   */
  public void awaitResponseChunksDelivered(int n) {
    await(stream.drivers.responseChunksDelivered.get(n - 1), n + " response chunks delivered");
  }

  /**
   * Waits until the last response body message went to the processor, or the exchange is over without
   * one (a local reply, a reset, or a body Envoy does not send).
   */
  public void awaitResponseEndSent() {
    await(
        stream.responseEndSent.applyToEither(stream.result.handle((r, e) -> (Void) null), v -> v),
        "end of the response sent");
  }

  /** The client's body so far (a copy). */
  public byte[] clientBodySoFar() {
    return stream.clientBodySoFar();
  }

  public List<ProcessingRequest> messagesSentSoFar() {
    return stream.sentSoFar();
  }

  /** Opens the next request chunk gate (the trailers gate comes last). */
  public ExchangeHandle releaseRequestChunk() {
    stream.drivers.requestGates.releaseNext();
    return this;
  }

  public ExchangeHandle releaseRequestBody() {
    stream.drivers.requestGates.releaseAll();
    return this;
  }

  public ExchangeHandle releaseResponseHeaders() {
    stream.drivers.responseHeaderGate.releaseAll();
    return this;
  }

  /** Opens the next response chunk gate (the trailers gate comes last). */
  public ExchangeHandle releaseResponseChunk() {
    stream.drivers.responseGates.releaseNext();
    return this;
  }

  public ExchangeHandle releaseResponseChunks(int n) {
    for (int i = 0; i < n; i++) {
      stream.drivers.responseGates.releaseNext();
    }
    return this;
  }

  /** Opens the response headers gate and every remaining response chunk and trailers gate. */
  public ExchangeHandle releaseResponseBody() {
    stream.drivers.responseHeaderGate.releaseAll();
    stream.drivers.responseGates.releaseAll();
    return this;
  }

  /** The downstream client aborts now: Envoy resets the gRPC stream and the exchange ends. */
  public ExchangeHandle resetDownstream() {
    stream.loop.execute(stream.guarded(stream::downstreamReset));
    return this;
  }

  private <T> T await(CompletableFuture<T> f, String what) {
    return await(f, awaitTimeout, what);
  }

  private static <T> T await(CompletableFuture<T> f, Duration timeout, String what) {
    try {
      return f.get(timeout.toMillis(), TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted waiting for " + what, e);
    } catch (ExecutionException e) {
      Throwable cause = e.getCause();
      if (cause instanceof RuntimeException re) {
        throw re;
      }
      throw new IllegalStateException("failed waiting for " + what, cause);
    } catch (TimeoutException e) {
      throw new IllegalStateException("timed out after " + timeout + " waiting for " + what, e);
    }
  }
}
