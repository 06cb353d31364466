package io.disaggusage.extproc.emulator.envoy;

import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.BooleanSupplier;
import java.util.function.Predicate;

/**
 * What the filter let through, as the upstream and the downstream client saw it: headers, body and
 * trailers on each side, the client's chunks, reset and local reply, and who waits for the client's
 * body to match a condition. Written on the filter's loop; the client's side is also read from the
 * harness's threads, hence synchronized. Kept apart so the filter decides what to forward and this
 * only records it and builds the result's two sides.
 */
final class ForwardedTraffic {
  private final SerialExecutor loop;
  private final BooleanSupplier finished;

  // Upstream view (loop-confined).
  private HeaderList upstreamHeaders;
  private final ByteArrayOutputStream upstreamBody = new ByteArrayOutputStream();
  private HeaderList upstreamTrailers;

  // Downstream client view.
  private HeaderList clientHeaders;
  private final ByteArrayOutputStream clientBody = new ByteArrayOutputStream();
  private final List<byte[]> clientChunks = new ArrayList<>();
  private HeaderList clientTrailers;
  private boolean clientReset;
  private LocalReply localReply;
  private final List<Map.Entry<Predicate<byte[]>, CompletableFuture<byte[]>>> bodyWatchers =
      new CopyOnWriteArrayList<>();

  ForwardedTraffic(SerialExecutor loop, BooleanSupplier finished) {
    this.loop = loop;
    this.finished = finished;
  }

  void upstreamHeaders(HeaderList headers) {
    upstreamHeaders = headers;
  }

  synchronized void clientHeaders(HeaderList headers) {
    clientHeaders = headers;
  }

  void upstreamData(byte[] bytes) {
    upstreamBody.writeBytes(bytes);
  }

  /** Records bytes the client received, completes the body watchers it satisfies; the body so far. */
  byte[] clientData(byte[] bytes) {
    byte[] snapshot;
    synchronized (this) {
      clientBody.writeBytes(bytes);
      clientChunks.add(bytes.clone());
      snapshot = clientBody.toByteArray();
    }
    for (var w : bodyWatchers) {
      if (!w.getValue().isDone() && w.getKey().test(snapshot)) {
        w.getValue().complete(snapshot);
      }
    }
    return snapshot;
  }

  void trailers(boolean upstream, HeaderList trailers) {
    if (upstream) {
      upstreamTrailers = trailers;
    } else {
      clientTrailers = trailers;
    }
  }

  /** The client has every byte its content-length announced. */
  boolean clientHasAnnouncedBody(int bodyBytes) {
    return clientHeaders != null
        && clientHeaders.contains("content-length")
        && !ClientResponse.mismatch(clientHeaders, bodyBytes);
  }

  void clientReset() {
    clientReset = true;
  }

  /** Records the local reply; returns whether the client's response had already started. */
  synchronized boolean localReply(LocalReply reply) {
    localReply = reply;
    return clientHeaders != null;
  }

  /** The local reply's response as the client receives it. */
  synchronized void localResponse(HeaderList headers, byte[] body) {
    clientHeaders = headers;
    clientBody.writeBytes(body);
    if (body.length > 0) {
      clientChunks.add(body.clone());
    }
  }

  UpstreamRequest upstream(boolean requestEnded) {
    return new UpstreamRequest(
        upstreamHeaders != null,
        upstreamHeaders,
        upstreamBody.toByteArray(),
        upstreamTrailers,
        requestEnded && upstreamHeaders != null);
  }

  synchronized ClientResponse client(boolean responseEnded) {
    int status = clientHeaders == null
        ? 0
        : clientHeaders.get(":status").map(Integer::parseInt).orElse(0);
    return new ClientResponse(
        status,
        clientHeaders,
        clientBody.toByteArray(),
        List.copyOf(clientChunks),
        clientTrailers,
        responseEnded && !clientReset,
        clientReset,
        Optional.ofNullable(localReply));
  }

  synchronized byte[] clientBodySoFar() {
    return clientBody.toByteArray();
  }

  CompletableFuture<byte[]> whenClientBody(Predicate<byte[]> condition) {
    CompletableFuture<byte[]> f = new CompletableFuture<>();
    bodyWatchers.add(Map.entry(condition, f));
    loop.execute(() -> {
      byte[] snapshot = clientBodySoFar();
      if (condition.test(snapshot)) {
        f.complete(snapshot);
      } else if (finished.getAsBoolean()) {
        f.completeExceptionally(new IllegalStateException("exchange ended before the condition held"));
      }
    });
    return f;
  }

  void failWatchers(Throwable t) {
    for (var w : bodyWatchers) {
      w.getValue().completeExceptionally(t);
    }
  }
}
