package io.disaggusage.bench.e2e;

import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.HeaderSendMode;
import io.envoyproxy.envoy.service.ext_proc.v3.BodyResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.CommonResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.ExternalProcessorGrpc;
import io.envoyproxy.envoy.service.ext_proc.v3.HeaderMutation;
import io.envoyproxy.envoy.service.ext_proc.v3.HeadersResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.TrailersResponse;
import io.disaggusage.extproc.stream.ExchangeCallHandler;
import io.grpc.BindableService;
import io.grpc.ServerServiceDefinition;
import io.grpc.stub.StreamObserver;

/**
 * The floor: an ext_proc server that asks Envoy for the same messages as the service does for a
 * handled exchange (request body STREAMED after the request headers, response body STREAMED after
 * the response headers, with the same header removals) and answers every message at once with no
 * body mutation. It parses nothing, stores nothing and holds nothing. Its calls are bound as the
 * service's are ({@link ExchangeCallHandler#bind}), so the floor pays no more per stream than the service
 * does for the transport.
 */
public final class NullProcessor implements ExternalProcessorGrpc.AsyncService, BindableService {
  private static final ProcessingResponse REQUEST_HEADERS =
      ProcessingResponse.newBuilder()
          .setRequestHeaders(headers(HeaderMutation.newBuilder().addRemoveHeaders("accept-encoding").build()))
          .setModeOverride(mode(true, false))
          .build();
  private static final ProcessingResponse RESPONSE_HEADERS =
      ProcessingResponse.newBuilder()
          .setResponseHeaders(headers(HeaderMutation.newBuilder().addRemoveHeaders("content-length").build()))
          .setModeOverride(mode(false, true))
          .build();
  private static final ProcessingResponse REQUEST_BODY =
      ProcessingResponse.newBuilder().setRequestBody(BodyResponse.getDefaultInstance()).build();
  private static final ProcessingResponse RESPONSE_BODY =
      ProcessingResponse.newBuilder().setResponseBody(BodyResponse.getDefaultInstance()).build();
  private static final ProcessingResponse REQUEST_TRAILERS =
      ProcessingResponse.newBuilder().setRequestTrailers(TrailersResponse.getDefaultInstance()).build();
  private static final ProcessingResponse RESPONSE_TRAILERS =
      ProcessingResponse.newBuilder().setResponseTrailers(TrailersResponse.getDefaultInstance()).build();

  @Override
  public StreamObserver<ProcessingRequest> process(StreamObserver<ProcessingResponse> out) {
    return new StreamObserver<>() {
      @Override
      public void onNext(ProcessingRequest request) {
        switch (request.getRequestCase()) {
          case REQUEST_HEADERS -> out.onNext(REQUEST_HEADERS);
          case REQUEST_BODY -> out.onNext(REQUEST_BODY);
          case RESPONSE_HEADERS -> out.onNext(RESPONSE_HEADERS);
          case RESPONSE_BODY -> out.onNext(RESPONSE_BODY);
          case REQUEST_TRAILERS -> out.onNext(REQUEST_TRAILERS);
          case RESPONSE_TRAILERS -> out.onNext(RESPONSE_TRAILERS);
          default -> {}
        }
      }

      @Override
      public void onError(Throwable t) {}

      @Override
      public void onCompleted() {
        out.onCompleted();
      }
    };
  }

  private static HeadersResponse headers(HeaderMutation mutation) {
    return HeadersResponse.newBuilder().setResponse(CommonResponse.newBuilder().setHeaderMutation(mutation)).build();
  }

  private static ProcessingMode mode(boolean requestBody, boolean responseBody) {
    return ProcessingMode.newBuilder()
        .setRequestHeaderMode(HeaderSendMode.SEND)
        .setResponseHeaderMode(HeaderSendMode.SEND)
        .setRequestBodyMode(requestBody ? BodySendMode.STREAMED : BodySendMode.NONE)
        .setResponseBodyMode(responseBody ? BodySendMode.STREAMED : BodySendMode.NONE)
        .setRequestTrailerMode(HeaderSendMode.SKIP)
        .setResponseTrailerMode(HeaderSendMode.SKIP)
        .build();
  }

  @Override
  public ServerServiceDefinition bindService() {
    return ExchangeCallHandler.bind(this::process);
  }
}
