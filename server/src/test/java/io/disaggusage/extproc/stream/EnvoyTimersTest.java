package io.disaggusage.extproc.stream;

import static io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest.RequestCase.REQUEST_BODY;
import static io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest.RequestCase.REQUEST_HEADERS;
import static io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest.RequestCase.RESPONSE_BODY;
import static io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest.RequestCase.RESPONSE_HEADERS;
import static org.assertj.core.api.Assertions.assertThat;

import com.google.protobuf.ByteString;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpBody;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpHeaders;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Whether Envoy gave up on the service, from its message timers as the service follows them: on a
 * clock the test moves, with Envoy's default 200 ms {@code message_timeout}.
 */
class EnvoyTimersTest {
  long now = 1_000_000_000L;
  final EnvoyTimers timers = new EnvoyTimers(Duration.ofMillis(200), () -> now);

  void advance(long millis) {
    now += TimeUnit.MILLISECONDS.toNanos(millis);
  }

  /** Whether Envoy gave up on a stream that ends {@code millis} from now. */
  boolean endedAfter(long millis) {
    advance(millis);
    timers.ended();
    return timers.gaveUp();
  }

  /** Envoy sent a message of {@code kind} and the service answered it at once. */
  void answeredAtOnce(ProcessingRequest.RequestCase kind) {
    timers.received(kind, true);
    timers.replied(kind);
  }

  @Test
  void aStreamEndingWithNothingOwedIsNoGiveUp() {
    answeredAtOnce(RESPONSE_HEADERS);
    assertThat(endedAfter(5_000)).isFalse();
  }

  @Test
  void aStreamEndingWhileAReplyIsOwedShorterThanTheTimeoutIsNoGiveUp() {
    answeredAtOnce(RESPONSE_HEADERS);
    timers.received(RESPONSE_BODY, true);
    assertThat(endedAfter(199)).as("a client hang-up mid-body").isFalse();
  }

  @Test
  void aStreamEndingWhileAReplyIsOwedForTheTimeoutIsAGiveUp() {
    answeredAtOnce(REQUEST_HEADERS);
    timers.received(RESPONSE_HEADERS, true);
    assertThat(endedAfter(200)).isTrue();
  }

  @Test
  void aReplyOwedForTheTimeoutWhenItGoesOutIsAGiveUpEvenIfTheStreamEndsLater() {
    timers.received(RESPONSE_BODY, true);
    advance(250); // the process was frozen, or starved
    timers.replied(RESPONSE_BODY);
    assertThat(endedAfter(1)).as("Envoy had passed the body on; the late reply is ignored").isTrue();
  }

  @Test
  void aReplyOverdueNowMeansTheReplyAboutToGoOutIsLate() {
    timers.received(RESPONSE_BODY, true);
    advance(100);
    assertThat(timers.gaveUp()).isFalse();
    advance(100);
    assertThat(timers.gaveUp()).isTrue();
  }

  @Test
  void onceTheStreamEndedTheAnswerStays() {
    timers.received(RESPONSE_BODY, true);
    advance(100);
    timers.ended();
    advance(1_000); // a store write that lands later asks again when it counts
    assertThat(timers.gaveUp()).isFalse();
    timers.received(RESPONSE_BODY, true);
    timers.replied(RESPONSE_BODY);
    assertThat(timers.gaveUp()).isFalse();
  }

  @Test
  void eachMessageRestartsItsDirectionsTimer() {
    timers.received(RESPONSE_BODY, true);
    advance(150);
    timers.received(RESPONSE_BODY, true); // Envoy's timer belongs to the latest message it sent
    assertThat(endedAfter(150)).as("owed 300 ms since the first, 150 ms since the latest").isFalse();
  }

  @Test
  void aReplyStopsOnlyItsOwnDirectionsTimer() {
    timers.received(RESPONSE_HEADERS, true);
    answeredAtOnce(REQUEST_BODY); // the request body still streams
    assertThat(endedAfter(200)).isTrue();
  }

  @Test
  void anEmptyEndOfStreamStartsNoTimer() {
    answeredAtOnce(RESPONSE_BODY);
    timers.received(RESPONSE_BODY, false); // held: a generation leg waiting for its context usage
    assertThat(endedAfter(1_500)).as("Envoy waits for that reply without a timer").isFalse();
  }

  @Test
  void anEmptyEndOfStreamLeavesTheRunningTimerAsItIs() {
    timers.received(RESPONSE_BODY, true);
    advance(150);
    timers.received(RESPONSE_BODY, false);
    assertThat(endedAfter(50)).isTrue();
  }

  @Test
  void anExtendedTimerRunsOutAtTheExtension() {
    timers.received(RESPONSE_BODY, true);
    advance(10);
    timers.extended(1_000);
    advance(999);
    assertThat(timers.gaveUp()).as("a client hang-up during the extended wait").isFalse();
    advance(1);
    assertThat(timers.gaveUp()).isTrue();
  }

  @Test
  void aTimerIsExtendedOncePerMessage() {
    timers.received(RESPONSE_BODY, true);
    timers.extended(1_000);
    timers.extended(5_000); // ignored by Envoy
    assertThat(endedAfter(1_000)).isTrue();
  }

  @Test
  void aNewMessageMayBeExtendedAgain() {
    timers.received(RESPONSE_BODY, true);
    timers.extended(1_000);
    advance(100);
    timers.received(RESPONSE_BODY, true);
    timers.extended(1_000);
    assertThat(endedAfter(999)).isFalse();
  }

  @Test
  void anExtensionWithoutARunningTimerIsIgnored() {
    answeredAtOnce(RESPONSE_BODY);
    timers.extended(1_000);
    timers.received(RESPONSE_BODY, true);
    assertThat(endedAfter(200)).isTrue();
  }

  @Test
  void theRequestDirectionsTimerIsExtendedFirst() {
    timers.received(REQUEST_BODY, true);
    timers.received(RESPONSE_HEADERS, true);
    timers.extended(1_000);
    assertThat(endedAfter(200)).as("the response headers' timer ran its 200 ms").isTrue();
  }

  @Test
  void anExtensionSentAfterTheTimerRanOutIsTooLate() {
    timers.received(RESPONSE_BODY, true);
    advance(200);
    timers.extended(1_000);
    timers.replied(RESPONSE_BODY);
    assertThat(endedAfter(0)).isTrue();
  }

  @Test
  void envoyRunsNoTimerForAnEmptyEndOfStreamBodyOnly() {
    assertThat(EnvoyTimers.timed(responseBody("", true))).isFalse();
    assertThat(EnvoyTimers.timed(requestBody("", true))).isFalse();
    assertThat(EnvoyTimers.timed(responseBody("data: [DONE]\n\n", true))).isTrue();
    assertThat(EnvoyTimers.timed(responseBody("", false))).isTrue();
    assertThat(EnvoyTimers.timed(requestBody("{}", false))).isTrue();
    assertThat(
            EnvoyTimers.timed(
                ProcessingRequest.newBuilder()
                    .setResponseHeaders(HttpHeaders.newBuilder().setEndOfStream(true))
                    .build()))
        .isTrue();
  }

  static ProcessingRequest responseBody(String body, boolean end) {
    return ProcessingRequest.newBuilder().setResponseBody(body(body, end)).build();
  }

  static ProcessingRequest requestBody(String body, boolean end) {
    return ProcessingRequest.newBuilder().setRequestBody(body(body, end)).build();
  }

  private static HttpBody body(String body, boolean end) {
    return HttpBody.newBuilder().setBody(ByteString.copyFromUtf8(body)).setEndOfStream(end).build();
  }
}
