package io.disaggusage.extproc.extproc;

import com.google.protobuf.ByteString;
import com.google.protobuf.Struct;
import com.google.protobuf.Value;
import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.metrics.Metrics;
import io.disaggusage.extproc.store.MemoryContextUsageStore;
import io.envoyproxy.envoy.config.core.v3.HeaderMap;
import io.envoyproxy.envoy.config.core.v3.HeaderValue;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpBody;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpHeaders;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.grpc.stub.StreamObserver;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.ScheduledExecutorService;

/**
 * Runs synthetic context and generation exchanges (JSON and SSE, every code path a real exchange takes)
 * through a private instance of the service before the listener opens. A cold JVM loads and compiles
 * the parsers on the first real exchange, which can exceed Envoy's 200 ms message timeout, and Envoy
 * would then let that exchange through uncorrected. The warm-up uses its own store and metrics, so it
 * leaves no trace in what operators see.
 */
public final class Warmup {
  private static final String PATH = "/v1/chat/completions";
  private static final String USAGE = "{\"prompt_tokens\":64,\"completion_tokens\":%d,\"total_tokens\":%d,\"prompt_tokens_details\":{\"cached_tokens\":%d}}";

  private Warmup() {}

  /**
   * What the warm-up did.
   *
   * @param nanos time taken
   * @param corrected every synthetic generation response came out corrected — a start-up self-check
   */
  public record Result(long nanos, boolean corrected) {}

  /** Runs {@code rounds} context+generation pairs. */
  public static Result run(Config config, ScheduledExecutorService timer, int rounds) {
    long start = System.nanoTime();
    boolean corrected = true;
    try (MemoryContextUsageStore store = new MemoryContextUsageStore(config.store().ttl(), 1024, timer)) {
      ExtProcService service = new ExtProcService(config, store, Metrics.standalone(), timer);
      for (int i = 0; i < rounds; i++) {
        String id = "warmup-" + i;
        exchange(service, id, "{\"kv_transfer_params\":{\"do_remote_decode\":true}}", "application/json",
            "{\"model\":\"w\",\"usage\":" + String.format(USAGE, 1, 65, 3) + "}");
        boolean sse = i % 2 == 0;
        String body =
            sse
                ? "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\ndata: {\"choices\":[],\"usage\":"
                    + String.format(USAGE, 2, 66, 64) + "}\n\ndata: [DONE]\n\n"
                : "{\"model\":\"w\",\"usage\":" + String.format(USAGE, 2, 66, 64) + "}";
        String out = exchange(service, id, "{\"kv_transfer_params\":{\"do_remote_prefill\":true}}",
            sse ? "text/event-stream" : "application/json", body);
        corrected &= out.contains("\"cached_tokens\":3}") && !out.contains("\"cached_tokens\":64}");
      }
    }
    return new Result(System.nanoTime() - start, corrected);
  }

  /** Drives one exchange; returns the response body bytes the client would receive. */
  private static String exchange(ExtProcService service, String id, String request, String contentType, String response) {
    ClientBody client = new ClientBody(response);
    StreamObserver<ProcessingRequest> stream = service.process(client);
    Struct attributes =
        Struct.newBuilder().putFields("xds.cluster_name", Value.newBuilder().setStringValue("warmup").build()).build();
    stream.onNext(
        ProcessingRequest.newBuilder()
            .setRequestHeaders(
                HttpHeaders.newBuilder()
                    .setHeaders(headers(":method", "POST", ":path", PATH, "x-request-id", id, "content-type", "application/json")))
            .putAttributes(EnvoyMessages.ATTRIBUTES_KEY, attributes)
            .build());
    stream.onNext(body(true, request));
    stream.onNext(
        ProcessingRequest.newBuilder()
            .setResponseHeaders(HttpHeaders.newBuilder().setHeaders(headers(":status", "200", "content-type", contentType)))
            .build());
    int half = response.length() / 2;
    stream.onNext(body(false, response.substring(0, half)));
    stream.onNext(
        ProcessingRequest.newBuilder()
            .setResponseBody(HttpBody.newBuilder().setBody(ByteString.copyFromUtf8(response.substring(half))).setEndOfStream(true))
            .build());
    stream.onCompleted();
    return client.text.toString();
  }

  private static ProcessingRequest body(boolean request, String text) {
    HttpBody.Builder body = HttpBody.newBuilder().setBody(ByteString.copyFromUtf8(text)).setEndOfStream(request);
    return request
        ? ProcessingRequest.newBuilder().setRequestBody(body).build()
        : ProcessingRequest.newBuilder().setResponseBody(body).build();
  }

  private static HeaderMap headers(String... pairs) {
    HeaderMap.Builder map = HeaderMap.newBuilder();
    for (int i = 0; i < pairs.length; i += 2) {
      map.addHeaders(
          HeaderValue.newBuilder().setKey(pairs[i]).setRawValue(ByteString.copyFrom(pairs[i + 1], StandardCharsets.UTF_8)));
    }
    return map.build();
  }

  /** Rebuilds the client's body from the response-body replies (the chunks were sent in two halves). */
  private static final class ClientBody implements StreamObserver<ProcessingResponse> {
    final StringBuilder text = new StringBuilder();
    private final String original;
    private int chunk;

    ClientBody(String original) {
      this.original = original;
    }

    @Override
    public void onNext(ProcessingResponse value) {
      if (!value.hasResponseBody()) {
        return;
      }
      int half = original.length() / 2;
      String sent = chunk++ == 0 ? original.substring(0, half) : original.substring(half);
      var common = value.getResponseBody().getResponse();
      text.append(common.hasBodyMutation() ? common.getBodyMutation().getBody().toStringUtf8() : sent);
    }

    @Override
    public void onError(Throwable t) {}

    @Override
    public void onCompleted() {}
  }
}
