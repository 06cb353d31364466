package io.disaggusage.extproc.driver;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.protobuf.ByteString;
import com.google.protobuf.Struct;
import com.google.protobuf.Value;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.HeaderSendMode;
import io.envoyproxy.envoy.service.ext_proc.v3.BodyMutation;
import io.envoyproxy.envoy.service.ext_proc.v3.BodyResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.CommonResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.HeadersResponse;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest.RequestCase;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.grpc.stub.StreamObserver;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.function.Function;
import org.junit.jupiter.api.Test;

class EnvoyStreamTest {
  private static final ProcessingMode STREAM_BOTH =
      ProcessingMode.newBuilder()
          .setRequestBodyMode(BodySendMode.STREAMED)
          .setResponseBodyMode(BodySendMode.STREAMED)
          .build();

  /** A processor that answers every message at once with what {@code answer} makes of it. */
  private static final class Processor implements StreamObserver<ProcessingRequest> {
    final List<ProcessingRequest> received = new ArrayList<>();
    final Function<ProcessingRequest, ProcessingResponse> answer;
    StreamObserver<ProcessingResponse> replies;
    boolean completed;
    Throwable reset;

    Processor(Function<ProcessingRequest, ProcessingResponse> answer) {
      this.answer = answer;
    }

    StreamObserver<ProcessingRequest> process(StreamObserver<ProcessingResponse> replies) {
      this.replies = replies;
      return this;
    }

    @Override
    public void onNext(ProcessingRequest message) {
      received.add(message);
      ProcessingResponse reply = answer.apply(message);
      if (reply != null) {
        replies.onNext(reply);
      }
    }

    @Override
    public void onError(Throwable t) {
      reset = t;
    }

    @Override
    public void onCompleted() {
      completed = true;
    }
  }

  private static ProcessingResponse headersReply(ProcessingRequest message, ProcessingMode override) {
    ProcessingResponse.Builder reply = ProcessingResponse.newBuilder();
    HeadersResponse headers = HeadersResponse.getDefaultInstance();
    if (message.hasRequestHeaders()) {
      reply.setRequestHeaders(headers);
    } else {
      reply.setResponseHeaders(headers);
    }
    return override == null ? reply.build() : reply.setModeOverride(override).build();
  }

  private static ProcessingResponse bodyReply(ProcessingRequest message, BodyMutation mutation) {
    CommonResponse.Builder common = CommonResponse.newBuilder();
    if (mutation != null) {
      common.setBodyMutation(mutation);
    }
    BodyResponse body = BodyResponse.newBuilder().setResponse(common).build();
    return message.hasRequestBody()
        ? ProcessingResponse.newBuilder().setRequestBody(body).build()
        : ProcessingResponse.newBuilder().setResponseBody(body).build();
  }

  private static List<byte[]> chunks(String... parts) {
    List<byte[]> out = new ArrayList<>();
    for (String part : parts) {
      out.add(part.getBytes(StandardCharsets.UTF_8));
    }
    return out;
  }

  @Test
  void streamsBodiesAfterTheModeOverrideAndAppliesEachChunksMutation() {
    Processor processor =
        new Processor(
            m -> switch (m.getRequestCase()) {
              case REQUEST_HEADERS -> headersReply(m, STREAM_BOTH);
              case RESPONSE_HEADERS -> headersReply(m, null);
              case REQUEST_BODY -> bodyReply(m, null);
              case RESPONSE_BODY -> {
                String chunk = m.getResponseBody().getBody().toStringUtf8();
                yield bodyReply(
                    m,
                    chunk.equals("b")
                        ? BodyMutation.newBuilder().setBody(ByteString.copyFromUtf8("B!")).build()
                        : chunk.equals("c") ? BodyMutation.newBuilder().setClearBody(true).build() : null);
              }
              default -> null;
            });
    Map<String, String> headers = new LinkedHashMap<>();
    headers.put(":path", "/v1/chat/completions");
    headers.put("x-request-id", "r1");

    EnvoyStream stream =
        EnvoyStream.open(processor::process)
            .requestHeaders(headers, "prefill", false)
            .requestBody(chunks("{\"a\":", "1}"))
            .responseHeaders(Map.of(":status", "200"), false)
            .responseBody(chunks("a", "b", "c", "d"));

    assertThat(stream.violation()).isNull();
    assertThat(stream.owed()).isZero();
    assertThat(stream.clientBodyUtf8()).isEqualTo("aB!d");
    assertThat(new String(stream.upstreamBody(), StandardCharsets.UTF_8)).isEqualTo("{\"a\":1}");
    assertThat(processor.received).hasSize(8);
    ProcessingRequest first = processor.received.get(0);
    assertThat(first.getRequestHeaders().getHeaders().getHeaders(0).getRawValue().toStringUtf8())
        .isEqualTo("/v1/chat/completions");
    assertThat(first.getAttributesOrThrow(FilterConfigs.FILTER_NAME).getFieldsOrThrow(EnvoyRequests.CLUSTER_NAME).getStringValue())
        .isEqualTo("prefill");
    List<ProcessingRequest> response = processor.received.subList(4, 8);
    assertThat(response).extracting(m -> m.getResponseBody().getEndOfStream()).containsExactly(false, false, false, true);
    assertThat(stream.complete().serverClosed()).isFalse();
    assertThat(processor.completed).isTrue();
  }

  @Test
  void withoutAnOverrideBodiesPassUntouchedAndSkippedResponseHeadersAreNotSent() {
    Processor processor =
        new Processor(
            m -> headersReply(m, ProcessingMode.newBuilder().setResponseHeaderMode(HeaderSendMode.SKIP).build()));
    EnvoyStream stream =
        EnvoyStream.open(processor::process)
            .requestHeaders(Map.of(":path", "/"), null, false)
            .requestBody(chunks("req"))
            .responseHeaders(Map.of(":status", "200"), false)
            .responseBody(chunks("x", "y"));

    assertThat(processor.received).extracting(ProcessingRequest::getRequestCase).containsExactly(RequestCase.REQUEST_HEADERS);
    assertThat(processor.received.get(0).getAttributesMap()).isEmpty();
    assertThat(stream.responseHeadersSent()).isFalse();
    assertThat(stream.clientBodyUtf8()).isEqualTo("xy");
    assertThat(stream.mode().getResponseHeaderMode()).isEqualTo(HeaderSendMode.SKIP);
  }

  @Test
  void timerExtensionsAreNotRepliesAndWrongRepliesAreViolations() {
    ProcessingResponse extension =
        ProcessingResponse.newBuilder().setOverrideMessageTimeout(com.google.protobuf.Duration.newBuilder().setSeconds(1)).build();
    Processor processor = new Processor(m -> null);
    EnvoyStream stream = EnvoyStream.open(processor::process).requestHeaders(Map.of(), null, false);

    processor.replies.onNext(extension);
    assertThat(stream.timerExtensions()).isEqualTo(1);
    assertThat(stream.owed()).isEqualTo(1);
    assertThat(stream.oldestOwed()).isEqualTo(RequestCase.REQUEST_HEADERS);

    processor.replies.onNext(ProcessingResponse.newBuilder().setResponseHeaders(HeadersResponse.getDefaultInstance()).build());
    assertThat(stream.violation()).isEqualTo("reply RESPONSE_HEADERS to REQUEST_HEADERS");
    assertThat(stream.owed()).isZero();

    processor.replies.onNext(ProcessingResponse.getDefaultInstance());
    assertThat(stream.violation()).as("the first violation is kept").startsWith("reply RESPONSE_HEADERS");
    assertThat(stream.replies()).isEqualTo(3);
  }

  @Test
  void spuriousAndEmptyRepliesAreViolations() {
    Processor processor = new Processor(m -> null);
    EnvoyStream spurious = EnvoyStream.open(processor::process);
    processor.replies.onNext(ProcessingResponse.newBuilder().setRequestHeaders(HeadersResponse.getDefaultInstance()).build());
    assertThat(spurious.violation()).isEqualTo("spurious reply REQUEST_HEADERS");

    EnvoyStream empty = EnvoyStream.open(processor::process);
    processor.replies.onNext(ProcessingResponse.getDefaultInstance());
    assertThat(empty.violation()).isEqualTo("empty reply");
  }

  @Test
  void awaitRepliesWaitsForALateReplyAndTellsTheListenerWhatItAnswered() throws Exception {
    CompletableFuture<RequestCase> heard = new CompletableFuture<>();
    Processor processor = new Processor(m -> null);
    EnvoyStream stream =
        EnvoyStream.open(
            processor::process,
            false,
            new EnvoyStream.Listener() {
              @Override
              public void replied(RequestCase answered, ProcessingResponse reply, long nanos) {
                heard.complete(answered);
              }

              @Override
              public void violated(String what) {
                heard.completeExceptionally(new AssertionError(what));
              }

              @Override
              public void closed(Throwable error) {}
            });
    stream.requestHeaders(Map.of(), "c", false);
    assertThat(stream.awaitReplies(Duration.ofMillis(20))).isFalse();

    Thread late = new Thread(() -> processor.replies.onNext(headersReply(processor.received.get(0), STREAM_BOTH)));
    late.start();
    assertThat(stream.awaitReplies(Duration.ofSeconds(10))).isTrue();
    late.join();
    assertThat(heard.get()).isEqualTo(RequestCase.REQUEST_HEADERS);
    assertThat(stream.mode().getResponseBodyMode()).isEqualTo(BodySendMode.STREAMED);

    stream.responseChunk("kept nowhere".getBytes(StandardCharsets.UTF_8), true);
    processor.replies.onNext(bodyReply(processor.received.get(1), null));
    assertThat(stream.clientBody()).as("collectBodies false").isEmpty();
  }

  @Test
  void aResetReachesTheProcessorAndTheProcessorsErrorEndsTheWait() throws Exception {
    Processor processor = new Processor(m -> null);
    EnvoyStream stream = EnvoyStream.open(processor::process).requestHeaders(Map.of(), null, false);
    processor.replies.onError(new IllegalStateException("boom"));
    assertThat(stream.awaitReplies(Duration.ofSeconds(10))).isFalse();
    assertThat(stream.serverClosed()).isTrue();
    assertThat(stream.violation()).contains("boom");
    stream.cancel();
    assertThat(processor.reset).isNotNull();
  }

  @Test
  void metadataReadsTheLastDynamicMetadataOfANamespace() {
    Struct metadata =
        Struct.newBuilder()
            .putFields(
                "ns",
                Value.newBuilder()
                    .setStructValue(
                        Struct.newBuilder()
                            .putFields("outcome", Value.newBuilder().setStringValue("rewritten").build())
                            .putFields("tokens", Value.newBuilder().setNumberValue(42).build()))
                    .build())
            .build();
    Processor processor = new Processor(m -> headersReply(m, null).toBuilder().setDynamicMetadata(metadata).build());
    EnvoyStream stream = EnvoyStream.open(processor::process).requestHeaders(Map.of(), null, false);
    assertThat(stream.metadata("ns", "outcome")).isEqualTo("rewritten");
    assertThat(stream.metadata("ns", "tokens")).isEqualTo("42");
    assertThat(stream.metadata("other", "outcome")).isNull();
  }
}
