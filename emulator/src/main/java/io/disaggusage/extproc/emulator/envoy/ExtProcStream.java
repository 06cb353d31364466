package io.disaggusage.extproc.emulator.envoy;

import com.google.protobuf.Struct;
import com.google.protobuf.Value;
import io.disaggusage.extproc.driver.EnvoyRequests;
import io.disaggusage.extproc.driver.FilterConfigs;
import io.disaggusage.extproc.emulator.envoy.ExchangeResult.StreamEnd;
import io.envoyproxy.envoy.config.core.v3.HeaderMap;
import io.envoyproxy.envoy.service.ext_proc.v3.ExternalProcessorGrpc;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.ProtocolConfiguration;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import io.grpc.stub.MetadataUtils;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * The exchange's ext_proc gRPC stream (Envoy's {@code ExternalProcessorStream} with the filter's
 * message building): opened with the first message, each message built with the protocol config,
 * metadata context and attributes Envoy adds, every message sent and reply received recorded, and
 * the stream's end (who closed it, how). Replies and the stream's end are posted to the filter's
 * loop. Kept apart so the filter and processor states only say what to send, not how it travels.
 */
final class ExtProcStream {
  static final String ATTRIBUTES_KEY = FilterConfigs.FILTER_NAME;

  private final FilterStream filter;
  private ClientCallStreamObserver<ProcessingRequest> call;
  private boolean protocolConfigSent;
  private boolean streamDone;
  private StreamEnd streamEnd = StreamEnd.NOT_OPENED;
  private Status serverStatus;
  private final List<ProcessingRequest> sent = Collections.synchronizedList(new ArrayList<>());
  private final List<ProcessingResponse> received = Collections.synchronizedList(new ArrayList<>());
  private final List<Map.Entry<Integer, CompletableFuture<List<ProcessingRequest>>>> sentWatchers =
      new CopyOnWriteArrayList<>();

  ExtProcStream(FilterStream filter) {
    this.filter = filter;
  }

  // ---------------------------------------------------------------------------------------------
  // Messages.

  /** A message with what Envoy adds to it: protocol config once, metadata context, attributes. */
  ProcessingRequest.Builder newMessage(ProcessorState d) {
    ProcessingRequest.Builder b = ProcessingRequest.newBuilder();
    if (!protocolConfigSent) {
      protocolConfigSent = true;
      b.setProtocolConfig(
          ProtocolConfiguration.newBuilder()
              .setRequestBodyMode(filter.req.bodyMode)
              .setResponseBodyMode(filter.resp.bodyMode)
              .setSendBodyWithoutWaitingForHeaderResponse(
                  filter.config.sendBodyWithoutWaitingForHeaderResponse()));
    }
    b.setMetadataContext(filter.config.forwardingMetadata(filter.dynamicMetadata));
    List<String> expressions = filter.config.attributes(d.isRequest);
    if (!d.attributesSent && !expressions.isEmpty()) {
      d.attributesSent = true;
      b.putAttributes(ATTRIBUTES_KEY, evaluateAttributes(d, expressions));
    }
    return b;
  }

  private Struct evaluateAttributes(ProcessorState d, List<String> expressions) {
    Map<String, Object> values = new LinkedHashMap<>();
    HeaderList rh = filter.req.headers;
    if (rh != null) {
      rh.get(":path").ifPresent(p -> {
        values.put("request.path", p);
        int q = p.indexOf('?');
        values.put("request.url_path", q < 0 ? p : p.substring(0, q));
      });
      rh.get(":method").ifPresent(v -> values.put("request.method", v));
      rh.get(":authority").ifPresent(v -> values.put("request.host", v));
      rh.get(":scheme").ifPresent(v -> values.put("request.scheme", v));
      rh.get("x-request-id").ifPresent(v -> values.put("request.id", v));
    }
    values.putAll(filter.exchange.requestAttributes);
    if (!d.isRequest) {
      filter.resp.headers.get(":status").ifPresent(s -> values.put("response.code", Long.parseLong(s)));
      values.putAll(filter.exchange.responseAttributes);
    }
    Struct.Builder s = Struct.newBuilder();
    for (String expr : expressions) {
      Object v = values.get(expr);
      if (v == null) {
        continue; // unresolvable expressions are silently omitted
      }
      Value.Builder pv = Value.newBuilder();
      if (v instanceof Boolean bool) {
        pv.setBoolValue(bool);
      } else if (v instanceof Number n) {
        pv.setNumberValue(n.doubleValue());
      } else {
        pv.setStringValue(v.toString());
      }
      s.putFields(expr, pv.build());
    }
    return s.build();
  }

  static HeaderMap toHeaderMap(HeaderList headers) {
    HeaderMap.Builder m = HeaderMap.newBuilder();
    for (var e : headers.entries()) {
      m.addHeaders(EnvoyRequests.header(e.getKey(), e.getValue()));
    }
    return m.build();
  }

  // ---------------------------------------------------------------------------------------------
  // The stream.

  /** Sends {@code msg} for direction {@code d}, opening the stream first, and starts d's timer. */
  void send(ProcessorState d, ProcessingRequest msg) {
    if (call == null) {
      open();
    }
    if (streamDone) {
      throw new IllegalStateException(
          "FakeEnvoy bug: message needed after the ext_proc stream was closed: " + msg.getRequestCase());
    }
    sent.add(msg);
    filter.inc(EnvoyStats.STREAM_MSGS_SENT);
    call.onNext(msg);
    d.startTimer();
    if (msg.hasResponseBody() && msg.getResponseBody().getEndOfStream()) {
      filter.responseEndSent.complete(null);
    }
    int n = sent.size();
    for (var w : sentWatchers) {
      if (n >= w.getKey()) {
        w.getValue().complete(List.copyOf(sent));
      }
    }
  }

  private void open() {
    filter.inc(EnvoyStats.STREAMS_STARTED);
    io.grpc.Metadata md = filter.config.initialMetadata(filter.exchange.grpcInitialMetadata);
    String authority = filter.config.authority();
    Channel channel = filter.envoy.channel();
    ExternalProcessorGrpc.ExternalProcessorStub stub =
        ExternalProcessorGrpc.newStub(channel)
            .withInterceptors(MetadataUtils.newAttachHeadersInterceptor(md), authorityInterceptor(authority));
    streamEnd = StreamEnd.CLOSED_BY_ENVOY;
    stub.process(
        new ClientResponseObserver<ProcessingRequest, ProcessingResponse>() {
          @Override
          public void beforeStart(ClientCallStreamObserver<ProcessingRequest> requestStream) {
            call = requestStream;
          }

          @Override
          public void onNext(ProcessingResponse value) {
            received.add(value);
            filter.loop.execute(() -> {
              filter.guarded(() -> filter.onReply(value)).run();
              filter.replyHandled();
            });
          }

          @Override
          public void onError(Throwable t) {
            Status s = Status.fromThrowable(t);
            filter.loop.execute(filter.guarded(() -> filter.onGrpcError(s)));
          }

          @Override
          public void onCompleted() {
            filter.loop.execute(filter.guarded(filter::onGrpcCompleted));
          }
        });
    filter.streamOpened.complete(null);
  }

  private static ClientInterceptor authorityInterceptor(String authority) {
    return new ClientInterceptor() {
      @Override
      public <Q, R> ClientCall<Q, R> interceptCall(
          MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
        return next.newCall(method, authority.isEmpty() ? options : options.withAuthority(authority));
      }
    };
  }

  /** Opened and not yet ended by either side. */
  boolean isOpen() {
    return call != null && !streamDone;
  }

  /** Envoy ends the stream (processing over, or the exchange ended). */
  void close() {
    if (call == null || streamDone) {
      return;
    }
    streamDone = true;
    streamEnd = StreamEnd.CLOSED_BY_ENVOY;
    filter.inc(EnvoyStats.STREAMS_CLOSED);
    halfCloseAndCancel("envoy closed the ext_proc stream");
  }

  /** The client hung up: the stream ends as on a message timeout. */
  void resetByDownstream() {
    if (isOpen()) {
      streamDone = true;
      streamEnd = StreamEnd.RESET_BY_DOWNSTREAM;
      halfCloseAndCancel("downstream reset");
    }
  }

  /** A harness failure: the stream is cancelled, not counted. */
  void cancel(Throwable t) {
    if (isOpen()) {
      streamDone = true;
      call.cancel("fake envoy failed: " + t, null);
    }
  }

  /** How Envoy ends an ext_proc stream, whatever the reason: a half-close, then a reset. */
  private void halfCloseAndCancel(String reason) {
    try {
      call.onCompleted();
    } catch (RuntimeException ignored) {
      // the call may already be closed by the transport
    }
    call.cancel(reason, null);
  }

  /** The processor ended the stream ({@code end}, {@code status}); false if it had already ended. */
  boolean endedByServer(StreamEnd end, Status status) {
    if (streamDone) {
      return false;
    }
    streamDone = true;
    streamEnd = end;
    serverStatus = status;
    return true;
  }

  // ---------------------------------------------------------------------------------------------
  // What was exchanged.

  StreamEnd streamEnd() {
    return streamEnd;
  }

  Status serverStatus() {
    return serverStatus;
  }

  List<ProcessingRequest> sentSoFar() {
    synchronized (sent) {
      return List.copyOf(sent);
    }
  }

  List<ProcessingResponse> receivedSoFar() {
    synchronized (received) {
      return List.copyOf(received);
    }
  }

  CompletableFuture<List<ProcessingRequest>> whenMessagesSent(int n) {
    CompletableFuture<List<ProcessingRequest>> f = new CompletableFuture<>();
    sentWatchers.add(Map.entry(n, f));
    filter.loop.execute(() -> {
      if (sent.size() >= n) {
        f.complete(List.copyOf(sent));
      } else if (filter.finished()) {
        f.completeExceptionally(new IllegalStateException("exchange ended after " + sent.size() + " messages"));
      }
    });
    return f;
  }

  void failWatchers(Throwable t) {
    for (var w : sentWatchers) {
      w.getValue().completeExceptionally(t);
    }
  }
}
