package io.disaggusage.extproc.emulator.envoy;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * The downstream client and the upstream as the {@link Exchange} scripts them: the bodies cut into
 * chunks, the gates and pauses before each, the client's resets, each codec event posted to the
 * filter's loop (Envoy's codecs and upstream, outside the filter). The upstream answers once the
 * filter lets it start. Kept apart so the filter only reacts to codec events.
 */
final class PeerDrivers {
  private final FilterStream filter;
  private final Exchange exchange;
  final Gates requestGates;
  final Gates responseHeaderGate;
  final Gates responseGates;
  private final List<byte[]> requestChunks;
  private final List<byte[]> responseChunks;
  /** Completed by the filter when the upstream may answer. */
  final CompletableFuture<Void> upstreamStart = new CompletableFuture<>();
  /** Per response chunk, in order: completes once that chunk's codec event has run on the loop. */
  final List<CompletableFuture<Void>> responseChunksDelivered = new ArrayList<>();
  /** Directions whose empty last chunk was delivered with the chunk before it (loop-confined). */
  private final Set<ProcessorState> endCameWithData = new HashSet<>();

  PeerDrivers(FilterStream filter, Exchange exchange) {
    this.filter = filter;
    this.exchange = exchange;
    requestChunks = exchange.requestChunking.split(exchange.requestBody);
    responseChunks = exchange.responseChunking.split(exchange.responseBody);
    requestGates =
        new Gates(requestChunks.size() + (exchange.requestTrailers != null ? 1 : 0), exchange.gateRequestBody);
    responseHeaderGate = new Gates(1, exchange.gateResponseHeaders);
    responseGates =
        new Gates(
            responseChunks.size() + (exchange.responseTrailers != null ? 1 : 0),
            exchange.gateResponseBody);
  }

  void start() {
    boolean reqNoBody = requestChunks.isEmpty() && exchange.requestTrailers == null;
    CompletableFuture<Void> chain =
        CompletableFuture.runAsync(
            filter.guarded(() -> filter.req.onHeaders(exchange.requestHeaders.copy(), reqNoBody)), filter.loop);
    for (int i = 0; i < requestChunks.size(); i++) {
      final int idx = i;
      final boolean eos = i == requestChunks.size() - 1 && exchange.requestTrailers == null;
      chain = chain
          .thenCompose(v -> requestGates.gate(idx))
          .thenCompose(v -> delay(exchange.requestChunkDelay))
          .thenRunAsync(filter.guarded(() -> deliver(filter.req, requestChunks, requestGates, exchange.requestChunkDelay, idx, eos)), filter.loop);
    }
    if (exchange.requestTrailers != null) {
      int idx = requestChunks.size();
      chain = chain
          .thenCompose(v -> requestGates.gate(idx))
          .thenRunAsync(filter.guarded(() -> filter.req.onTrailers(exchange.requestTrailers.copy())), filter.loop);
    }

    boolean respNoBody = responseChunks.isEmpty() && exchange.responseTrailers == null;
    CompletableFuture<Void> rchain = upstreamStart
        .thenCompose(v -> responseHeaderGate.gate(0))
        .thenRunAsync(filter.guarded(() -> filter.resp.onHeaders(exchange.responseHeaders.copy(), respNoBody)), filter.loop);
    if (exchange.downstreamResetAfterResponseChunks == 0) {
      rchain = rchain.thenRunAsync(filter.guarded(filter::downstreamReset), filter.loop);
    }
    for (int i = 0; i < responseChunks.size(); i++) {
      final int idx = i;
      final boolean eos = i == responseChunks.size() - 1 && exchange.responseTrailers == null;
      rchain = rchain
          .thenCompose(v -> responseGates.gate(idx))
          .thenCompose(v -> delay(exchange.responseChunkDelay))
          .thenRunAsync(filter.guarded(() -> deliver(filter.resp, responseChunks, responseGates, exchange.responseChunkDelay, idx, eos)), filter.loop);
      responseChunksDelivered.add(rchain);
      if (exchange.downstreamResetAfterResponseChunks == idx + 1) {
        rchain = rchain.thenRunAsync(filter.guarded(filter::downstreamReset), filter.loop);
      }
    }
    if (exchange.responseTrailers != null) {
      int idx = responseChunks.size();
      rchain.thenCompose(v -> responseGates.gate(idx))
          .thenRunAsync(filter.guarded(() -> filter.resp.onTrailers(exchange.responseTrailers.copy())), filter.loop);
    }
  }

  /**
   * Delivers chunk {@code idx} as one codec event. An empty last chunk that is already there (its
   * gate open, no pause before it) comes in the same event as the chunk before it, as Envoy's codecs
   * report the end of a body read together with its last bytes: an HTTP/1 body's length reached or its
   * chunked terminator, an HTTP/2 end of stream read with the data. The two messages then go to the
   * processor back to back, before any reply to the first can arrive.
   */
  private void deliver(ProcessorState d, List<byte[]> chunks, Gates gates, Duration pause, int idx, boolean eos) {
    int last = chunks.size() - 1;
    if (idx == last && endCameWithData.contains(d)) {
      return;
    }
    d.onData(chunks.get(idx), eos);
    boolean endFollows = idx == last - 1 && chunks.get(last).length == 0 && (d.isRequest
        ? exchange.requestTrailers == null : exchange.responseTrailers == null);
    if (endFollows && pause.isZero() && gates.gate(last).isDone()) {
      endCameWithData.add(d);
      d.onData(chunks.get(last), true);
    }
  }

  private CompletableFuture<Void> delay(Duration d) {
    if (d.isZero()) {
      return CompletableFuture.completedFuture(null);
    }
    return CompletableFuture.runAsync(
        () -> {}, CompletableFuture.delayedExecutor(d.toNanos(), TimeUnit.NANOSECONDS, filter.envoy.pool()));
  }
}
