package io.disaggusage.bench;

import com.google.protobuf.ByteString;
import com.google.protobuf.Struct;
import com.google.protobuf.Value;
import io.disaggusage.bench.e2e.EndToEnd;
import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.stream.ExtProcService;
import io.disaggusage.extproc.metrics.Metrics;
import io.disaggusage.extproc.testkit.Wire;
import io.disaggusage.extproc.store.MemoryContextUsageStore;
import io.envoyproxy.envoy.config.core.v3.HeaderMap;
import io.envoyproxy.envoy.config.core.v3.HeaderValue;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpBody;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpHeaders;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.grpc.stub.StreamObserver;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Retained heap per in-flight generation stream: K generation exchanges are opened through
 * {@code ExtProcService.process()} (no transport), each stopped in the middle of its SSE response
 * body with a partial event held, and the used heap after a full GC is compared with the heap before
 * they opened. The context usage each one took from the store was put there before the baseline and
 * is gone afterwards, so the difference is the streams' own state. Run in a JVM of its own.
 */
public final class MemoryProbe {
  private static final String PATH = "/v1/chat/completions";

  /**
   * Bytes per in-flight stream, per stored context usage, and per stream still retained after the
   * streams were reset and dropped (a leak check: about zero).
   */
  public record Result(int streams, double bytesPerStream, double bytesPerStoreEntry, double bytesPerClosedStream) {}

  private MemoryProbe() {}

  public static void main(String[] args) throws Exception {
    int k = args.length > 0 ? Integer.parseInt(args[0]) : 10_000;
    Result r = measure(k);
    System.out.printf(
        java.util.Locale.ROOT, "MEMORY %d %.1f %.1f %.1f%n",
        r.streams(), r.bytesPerStream(), r.bytesPerStoreEntry(), r.bytesPerClosedStream());
  }

  public static Result measure(int k) throws Exception {
    ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor();
    Config config = EndToEnd.config();
    try (MemoryContextUsageStore store =
        new MemoryContextUsageStore(config.store().ttl(), Math.max(config.store().maxEntries(), 2 * k), timer)) {
      ExtProcService service = new ExtProcService(config, store, Metrics.standalone(), timer);
      Sink sink = new Sink();
      byte[] stream = Bodies.chatStream(EndToEnd.CONTENT_EVENTS, 11);
      // The stream has passed four chunks of 1-16 KiB and stopped inside an event, as Envoy's chunks
      // do: the stream holds a partial event and whatever its buffers kept from the busiest chunk.
      List<byte[]> chunks = Bodies.chunks(stream, 1024, 16 * 1024, 11);
      int cut = 0;
      for (int i = 0; i < 4; i++) {
        cut += chunks.get(i).length;
      }
      while (stream[cut - 1] == '\n') {
        cut++;
      }
      List<byte[]> firstChunks = Bodies.chunks(Arrays.copyOf(stream, cut), 1024, 16 * 1024, 11);
      for (int i = 0; i < 500; i++) { // warm-up: complete pairs
        context(service, sink, "w" + i);
        StreamObserver<ProcessingRequest> g = openGeneration(service, sink, "w" + i, firstChunks);
        g.onNext(body(false, Arrays.copyOfRange(stream, cut, stream.length), true));
        g.onCompleted();
      }
      StreamObserver<?>[] open = new StreamObserver<?>[k];
      long empty = usedAfterGc();
      for (int i = 0; i < k; i++) {
        context(service, sink, "c" + i);
      }
      long stored = usedAfterGc();
      long replies = sink.replies.get();
      for (int i = 0; i < k; i++) {
        open[i] = openGeneration(service, sink, "c" + i, firstChunks);
      }
      long inFlight = usedAfterGc();
      // A reply to every message (request headers, request body, response headers, the body chunks)
      // and every stored context usage taken.
      if (sink.replies.get() - replies != (3L + firstChunks.size()) * k || store.size() != 0) {
        throw new IllegalStateException("streams did not reach the middle of the body: replies "
            + (sink.replies.get() - replies) + ", store " + store.size());
      }
      for (int i = 0; i < k; i++) {
        @SuppressWarnings("unchecked")
        StreamObserver<ProcessingRequest> s = (StreamObserver<ProcessingRequest>) open[i];
        s.onError(io.grpc.Status.CANCELLED.asRuntimeException());
        open[i] = null; // as gRPC drops a finished call
      }
      long closed = usedAfterGc();
      return new Result(
          k, (inFlight - empty) / (double) k, (stored - empty) / (double) k, (closed - empty) / (double) k);
    } finally {
      timer.shutdownNow();
    }
  }

  private static long usedAfterGc() throws InterruptedException {
    var memory = ManagementFactory.getMemoryMXBean();
    long used = Long.MAX_VALUE;
    for (int i = 0; i < 4; i++) {
      System.gc();
      Thread.sleep(100);
      used = Math.min(used, memory.getHeapMemoryUsage().getUsed());
    }
    return used;
  }

  private static void context(ExtProcService service, Sink sink, String id) {
    StreamObserver<ProcessingRequest> s = service.process(sink);
    s.onNext(requestHeaders(id, EndToEnd.CONTEXT_CLUSTER));
    s.onNext(body(true, "{\"model\":\"m\",\"max_tokens\":1,\"kv_transfer_params\":{\"do_remote_decode\":true}}"
        .getBytes(StandardCharsets.UTF_8), true));
    s.onNext(responseHeaders("application/json"));
    s.onNext(body(false, Wire.chatCompletion("ctx", Bodies.CONTEXT_USAGE).getBytes(StandardCharsets.UTF_8), true));
    s.onCompleted();
  }

  private static StreamObserver<ProcessingRequest> openGeneration(
      ExtProcService service, Sink sink, String id, List<byte[]> firstChunks) {
    StreamObserver<ProcessingRequest> s = service.process(sink);
    s.onNext(requestHeaders(id, EndToEnd.GENERATION_CLUSTER));
    s.onNext(body(true, ("{\"model\":\"m\",\"stream\":true,\"stream_options\":{\"include_usage\":true},"
        + "\"kv_transfer_params\":{\"do_remote_prefill\":true}}").getBytes(StandardCharsets.UTF_8), true));
    s.onNext(responseHeaders("text/event-stream"));
    for (byte[] chunk : firstChunks) {
      s.onNext(body(false, chunk, false));
    }
    return s;
  }

  private static ProcessingRequest requestHeaders(String id, String cluster) {
    Struct attributes =
        Struct.newBuilder().putFields("xds.cluster_name", Value.newBuilder().setStringValue(cluster).build()).build();
    return ProcessingRequest.newBuilder()
        .setRequestHeaders(HttpHeaders.newBuilder().setHeaders(headers(
            ":method", "POST", ":path", PATH, ":authority", "upstream.local", ":scheme", "http",
            "x-request-id", id, "content-type", "application/json", "accept-encoding", "gzip")))
        .putAttributes("envoy.filters.http.ext_proc", attributes)
        .build();
  }

  private static ProcessingRequest responseHeaders(String contentType) {
    return ProcessingRequest.newBuilder()
        .setResponseHeaders(HttpHeaders.newBuilder().setHeaders(headers(":status", "200", "content-type", contentType)))
        .build();
  }

  private static ProcessingRequest body(boolean request, byte[] bytes, boolean end) {
    HttpBody.Builder b = HttpBody.newBuilder().setBody(ByteString.copyFrom(bytes)).setEndOfStream(end);
    return request
        ? ProcessingRequest.newBuilder().setRequestBody(b).build()
        : ProcessingRequest.newBuilder().setResponseBody(b).build();
  }

  private static HeaderMap headers(String... pairs) {
    HeaderMap.Builder map = HeaderMap.newBuilder();
    for (int i = 0; i < pairs.length; i += 2) {
      map.addHeaders(HeaderValue.newBuilder().setKey(pairs[i])
          .setRawValue(ByteString.copyFrom(pairs[i + 1], StandardCharsets.UTF_8)));
    }
    return map.build();
  }

  /** Shared by every stream: counts replies and keeps none. */
  private static final class Sink implements StreamObserver<ProcessingResponse> {
    final AtomicLong replies = new AtomicLong();

    @Override
    public void onNext(ProcessingResponse value) {
      replies.incrementAndGet();
    }

    @Override
    public void onError(Throwable t) {}

    @Override
    public void onCompleted() {}
  }
}
