package io.disaggusage.extproc.stream;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.protobuf.ByteString;
import io.disaggusage.extproc.rewrite.Bytes;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpBody;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpTrailers;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest.RequestCase;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The reply queue's ledger: after a failure at each point of an exchange, the bytes owed go out
 * exactly once, in order, with the right reply; every other reply owed passes things through.
 */
class ReplyQueueTest {
  final List<ProcessingResponse> sent = new ArrayList<>();
  int gone;
  long bytesOut;
  final ReplyQueue.Listener listener =
      new ReplyQueue.Listener() {
        @Override
        public void sent(int bytes) {
          bytesOut += bytes;
        }

        @Override
        public void gone() {
          gone++;
        }
      };
  long now;
  final EnvoyTimers timers = new EnvoyTimers(Duration.ofMillis(200), () -> now);
  final ReplyQueue replies = new ReplyQueue(recorder(), listener, timers);

  StreamObserver<ProcessingResponse> recorder() {
    return new StreamObserver<>() {
      @Override
      public void onNext(ProcessingResponse reply) {
        sent.add(reply);
      }

      @Override
      public void onError(Throwable t) {}

      @Override
      public void onCompleted() {}
    };
  }

  static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  static ProcessingRequest responseBody(String chunk) {
    return ProcessingRequest.newBuilder()
        .setResponseBody(HttpBody.newBuilder().setBody(ByteString.copyFromUtf8(chunk)))
        .build();
  }

  static ProcessingRequest responseTrailers() {
    return ProcessingRequest.newBuilder().setResponseTrailers(HttpTrailers.getDefaultInstance()).build();
  }

  /** The replacement body a response body reply carries, or null when it forwards the chunk as it came. */
  static String replacement(ProcessingResponse reply) {
    assertThat(reply.hasResponseBody()).as("a response body reply").isTrue();
    var common = reply.getResponseBody().getResponse();
    return common.hasBodyMutation() ? common.getBodyMutation().getBody().toStringUtf8() : null;
  }

  @Test
  void repliesLeaveInTheOrderTheMessagesCame() {
    ReplyQueue.Slot first = replies.open(RequestCase.RESPONSE_BODY);
    ReplyQueue.Slot second = replies.open(RequestCase.RESPONSE_TRAILERS);
    replies.complete(second, EnvoyMessages.trailers(false));
    assertThat(sent).isEmpty();
    replies.complete(first, EnvoyMessages.body(false, null, null));
    assertThat(sent).hasSize(2);
    assertThat(sent.get(0).hasResponseBody()).isTrue();
    assertThat(sent.get(1).hasResponseTrailers()).isTrue();
  }

  /**
   * A failure gives back what the filter held; bytes already taken for the reply (none before anything
   * was taken) go before them.
   */
  @ParameterizedTest(name = "taken before the failure: \"{0}\"")
  @ValueSource(strings = {"", "taken-"})
  void aFailureGivesBackWhatWasTakenThenWhatTheFilterHeld(String taken) {
    ReplyQueue.Slot slot = replies.open(RequestCase.RESPONSE_BODY);
    if (!taken.isEmpty()) {
      replies.owe(slot, utf8(taken));
    }
    replies.failOpen(utf8("held"), responseBody("chunk"), slot);
    assertThat(sent).hasSize(1);
    assertThat(replacement(sent.get(0))).isEqualTo(taken + "held");
    assertThat(bytesOut).isEqualTo(taken.length() + 4);
  }

  /** The last response body message's reply, owing {@code owed} and held (it waits for the context usage). */
  private ReplyQueue.Slot heldLastBodyReply(String owed) {
    ReplyQueue.Slot last = replies.open(RequestCase.RESPONSE_BODY);
    replies.owe(last, utf8(owed));
    replies.hold(last);
    return last;
  }

  @Test
  void theHeldLastReplyCarriesEverythingOwedWhenAStoreResultFails() {
    ReplyQueue.Slot last = heldLastBodyReply("a");
    ReplyQueue.Slot trailers = replies.open(RequestCase.RESPONSE_TRAILERS);
    assertThat(replies.held()).isSameAs(last);
    // The context usage landed, more bytes were taken for the last reply, then building it failed.
    replies.owe(last, utf8("b"));
    replies.failOpen(utf8("c"), null, null);
    assertThat(sent).hasSize(2);
    assertThat(replacement(sent.get(0))).isEqualTo("abc");
    assertThat(sent.get(1).hasResponseTrailers()).as("the trailers message's own neutral reply").isTrue();
    assertThat(replies.held()).isNull();
    assertThat(trailers.answered()).isTrue();
  }

  @Test
  void theHeldReplyTakesTheBytesWhenAnotherMessageFails() {
    heldLastBodyReply("owed");
    ReplyQueue.Slot trailers = replies.open(RequestCase.RESPONSE_TRAILERS);
    replies.failOpen(utf8("+held"), responseTrailers(), trailers);
    assertThat(replacement(sent.get(0))).isEqualTo("owed+held");
    assertThat(sent.get(1).hasResponseTrailers()).isTrue();
  }

  @Test
  void withoutABodyReplyTheBytesGoOutWithTheNextBodyMessageOnce() {
    ReplyQueue.Slot headers = replies.open(RequestCase.RESPONSE_HEADERS);
    replies.failOpen(utf8("held"), null, headers);
    assertThat(sent).hasSize(1);
    assertThat(sent.get(0).hasResponseHeaders()).isTrue();
    ReplyQueue.Slot next = replies.open(RequestCase.RESPONSE_BODY);
    replies.forward(next, ByteString.copyFromUtf8("-next"));
    assertThat(replacement(sent.get(1))).isEqualTo("held-next");
    ReplyQueue.Slot after = replies.open(RequestCase.RESPONSE_BODY);
    replies.forward(after, ByteString.copyFromUtf8("-after"));
    assertThat(replacement(sent.get(2))).as("given back once").isNull();
    assertThat(bytesOut).isEqualTo("held-next".length() + "-after".length());
  }

  @Test
  void aCompletedReplyIsNoLongerHeld() {
    ReplyQueue.Slot last = heldLastBodyReply("sent");
    replies.complete(last, replies.bodyReply(null, utf8("sent"), null));
    assertThat(replies.held()).isNull();
    ReplyQueue.Slot trailers = replies.open(RequestCase.RESPONSE_TRAILERS);
    replies.failOpen(utf8("rest"), responseTrailers(), trailers);
    assertThat(sent.get(1).hasResponseTrailers()).isTrue();
    replies.forward(replies.open(RequestCase.RESPONSE_BODY), ByteString.EMPTY);
    assertThat(replacement(sent.get(2))).as("not owed twice: only what the filter held").isEqualTo("rest");
  }

  @Test
  void aReplyWaitingForAStoreWriteForwardsItsChunkAsItCameWhenALaterMessageFails() {
    ReplyQueue.Slot storing = replies.open(RequestCase.RESPONSE_BODY);
    replies.owe(storing, utf8("chunk"));
    ReplyQueue.Slot later = replies.open(RequestCase.RESPONSE_BODY);
    replies.failOpen(utf8("held"), responseBody("later"), later);
    assertThat(replacement(sent.get(0))).as("its chunk passes unchanged").isNull();
    assertThat(replacement(sent.get(1))).isEqualTo("held");
  }

  @Test
  void aBodyReplyForwardsTheChunkWhenTheOutputIsTheInput() {
    ProcessingResponse same = replies.bodyReply(utf8("x"), utf8("x"), null);
    ProcessingResponse changed = replies.bodyReply(utf8("x"), utf8("y"), null);
    assertThat(replacement(same)).isNull();
    assertThat(replacement(changed)).isEqualTo("y");
    assertThat(bytesOut).isEqualTo(2);
  }

  @Test
  void nothingIsSentAfterCloseAndACancelledStreamIsReported() {
    ReplyQueue cancelled =
        new ReplyQueue(
            new StreamObserver<>() {
              @Override
              public void onNext(ProcessingResponse reply) {
                throw Status.CANCELLED.asRuntimeException();
              }

              @Override
              public void onError(Throwable t) {}

              @Override
              public void onCompleted() {}
            },
            listener,
            timers);
    cancelled.complete(cancelled.open(RequestCase.RESPONSE_TRAILERS), EnvoyMessages.trailers(false));
    assertThat(gone).isEqualTo(1);

    assertThat(replies.close()).isTrue();
    assertThat(replies.close()).isFalse();
    replies.complete(replies.open(RequestCase.RESPONSE_BODY), EnvoyMessages.trailers(false));
    assertThat(sent).isEmpty();
  }

  @Test
  void aHeadersReplyStillWaitingForTheStoreStaysAHeadersReplyAfterAFailure() {
    ReplyQueue.Slot headers = replies.open(RequestCase.RESPONSE_HEADERS);
    ReplyQueue.Slot body = replies.open(RequestCase.RESPONSE_BODY);
    replies.failOpen(Bytes.EMPTY, responseBody("chunk"), body);
    assertThat(sent).hasSize(2);
    assertThat(sent.get(0).hasResponseHeaders()).as("the lookup's reply answers the headers message").isTrue();
    assertThat(sent.get(1).hasResponseBody()).isTrue();
    assertThat(headers.answered()).isTrue();
  }

  // ---------------------------------------------------------------------------------------------
  // What Envoy's timers hear from the queue

  @Test
  void aHeldReplyThatGoesOutAfterEnvoysTimeoutTellsTheTimersEnvoyGaveUp() {
    ReplyQueue.Slot held = replies.open(responseBody("the usage"));
    replies.hold(held);
    now += TimeUnit.MILLISECONDS.toNanos(EnvoyTimersTest.RUNS_OUT - 1);
    assertThat(timers.gaveUp()).isFalse();
    now += TimeUnit.MILLISECONDS.toNanos(1);
    replies.complete(held, EnvoyMessages.body(false, null, null));
    assertThat(sent).hasSize(1);
    replies.close();
    assertThat(timers.gaveUp()).isTrue();
  }

  @Test
  void aReplyStopsTheTimerOfEverythingEnvoySentBeforeIt() {
    replies.complete(replies.open(responseBody("chunk")), EnvoyMessages.body(false, null, null));
    // the empty end, right behind: Envoy may have sent it before the reply reached it
    replies.open(ProcessingRequest.newBuilder().setResponseBody(HttpBody.newBuilder().setEndOfStream(true)).build());
    now += TimeUnit.SECONDS.toNanos(2);
    assertThat(replies.close()).isTrue();
    assertThat(timers.gaveUp()).as("a timer would have ended the stream long before").isFalse();
  }

  @Test
  void theStreamEndingWithATimedReplyOverdueIsAGiveUpAndAnExtensionPutsItOff() {
    replies.open(RequestCase.RESPONSE_HEADERS);
    replies.extendTimer(1_000);
    assertThat(sent).singleElement().satisfies(r -> assertThat(r.getOverrideMessageTimeout().getSeconds()).isEqualTo(1));
    now += TimeUnit.MILLISECONDS.toNanos(EnvoyTimersTest.EXTENSION_RUNS_OUT - 1);
    assertThat(timers.gaveUp()).isFalse();
    now += TimeUnit.MILLISECONDS.toNanos(1);
    replies.close();
    assertThat(timers.gaveUp()).isTrue();
  }
}
