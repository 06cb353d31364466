package io.disaggusage.extproc.stream;

import static io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest.RequestCase.REQUEST_BODY;
import static io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest.RequestCase.REQUEST_HEADERS;
import static io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest.RequestCase.RESPONSE_BODY;
import static io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest.RequestCase.RESPONSE_HEADERS;
import static org.assertj.core.api.Assertions.assertThat;

import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Whether Envoy gave up on the service, from its message timers as the service follows them: on a
 * clock the test moves, with Envoy's default 200 ms {@code message_timeout}.
 */
class EnvoyTimersTest {
  static final long SLACK = 200 * EnvoyTimers.SLACK_PERCENT / 100;
  /** When a 200 ms timer counts as run out: Envoy's fires a little early by the service's clock. */
  static final long RUNS_OUT = 200 - SLACK;
  /** The same for a timer extended to a second. */
  static final long EXTENSION_RUNS_OUT = 1_000 - SLACK;
  /** How long after that the stream may end for a message that may have crossed a reply to count. */
  static final long LATE_END = 200 * EnvoyTimers.LATE_END_PERCENT / 100;

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
    timers.received(kind);
    timers.replied(kind);
  }

  /** A body chunk that came right behind the reply to the one before: it may have crossed that reply. */
  void chunkRightBehindAReply() {
    answeredAtOnce(RESPONSE_BODY);
    advance(1);
    timers.received(RESPONSE_BODY);
  }

  @Test
  void aStreamEndingWithNothingOwedIsNoGiveUp() {
    answeredAtOnce(RESPONSE_HEADERS);
    assertThat(endedAfter(5_000)).isFalse();
  }

  @Test
  void aStreamEndingWhileAReplyIsOwedShorterThanTheTimeoutIsNoGiveUp() {
    answeredAtOnce(RESPONSE_HEADERS);
    timers.received(RESPONSE_BODY);
    assertThat(endedAfter(RUNS_OUT - 1)).as("a client hang-up mid-body").isFalse();
  }

  @Test
  void aStreamEndingWhileAReplyIsOwedForTheTimeoutIsAGiveUp() {
    answeredAtOnce(REQUEST_HEADERS);
    timers.received(RESPONSE_HEADERS);
    assertThat(endedAfter(RUNS_OUT)).as("Envoy 1.40 logged 199 ms for its 200 ms timer").isTrue();
  }

  @Test
  void aTimerThatCertainlyRanHasRunOutHoweverLateTheEndIsHeardOf() {
    timers.received(RESPONSE_HEADERS);
    assertThat(endedAfter(5_000)).as("the service was frozen, its store answered late").isTrue();
  }

  @Test
  void aReplyOwedForTheTimeoutWhenItGoesOutIsAGiveUpEvenIfTheStreamEndsLater() {
    timers.received(RESPONSE_BODY);
    advance(250); // the process was frozen, or starved
    timers.replied(RESPONSE_BODY);
    assertThat(endedAfter(1)).as("Envoy had passed the body on; the late reply is ignored").isTrue();
  }

  @Test
  void aReplyOverdueNowMeansTheReplyAboutToGoOutIsLate() {
    timers.received(RESPONSE_BODY);
    advance(RUNS_OUT - 1);
    assertThat(timers.gaveUp()).isFalse();
    advance(1);
    assertThat(timers.gaveUp()).isTrue();
  }

  @Test
  void onceTheStreamEndedTheAnswerStays() {
    timers.received(RESPONSE_BODY);
    advance(100);
    timers.ended();
    advance(1_000); // a store write that lands later asks again when it counts
    assertThat(timers.gaveUp()).isFalse();
    timers.received(RESPONSE_BODY);
    timers.replied(RESPONSE_BODY);
    assertThat(timers.gaveUp()).isFalse();
  }

  @Test
  void eachMessageRestartsItsDirectionsTimer() {
    timers.received(RESPONSE_BODY);
    advance(150);
    timers.received(RESPONSE_BODY); // Envoy's timer belongs to the latest message it sent
    assertThat(endedAfter(150)).as("owed 300 ms since the first, 150 ms since the latest").isFalse();
  }

  @Test
  void aReplyStopsOnlyItsOwnDirectionsTimer() {
    timers.received(RESPONSE_HEADERS);
    answeredAtOnce(REQUEST_BODY); // the request body still streams
    assertThat(endedAfter(RUNS_OUT)).isTrue();
  }

  // ---------------------------------------------------------------------------------------------
  // A message and a reply that may have crossed

  @Test
  void aLateReplyToAChunkThatMayHaveCrossedAReplyProvesNothing() {
    chunkRightBehindAReply(); // held: a context write that took a second
    advance(1_000);
    timers.replied(RESPONSE_BODY);
    assertThat(endedAfter(1)).as("Envoy 1.40 waited without a timer").isFalse();
  }

  @Test
  void aStreamEndingWhenTheTimerOfAChunkThatMayHaveCrossedWouldRunOutIsAGiveUp() {
    chunkRightBehindAReply();
    assertThat(endedAfter(RUNS_OUT + LATE_END - 1)).as("Envoy ends the stream as its timer fires").isTrue();
  }

  @Test
  void aStreamEndingLongAfterTheTimerOfAChunkThatMayHaveCrossedWouldRunOutIsAReset() {
    chunkRightBehindAReply();
    assertThat(endedAfter(RUNS_OUT + LATE_END)).as("a timer would have ended it earlier: none ran").isFalse();
  }

  @Test
  void anEmptyEndRightBehindTheLastDataIsSuchAChunk() {
    chunkRightBehindAReply(); // a content-length body's end: "Envoy runs no timer for it"
    assertThat(endedAfter(1_500)).as("a client hang-up while the generation waits for its context").isFalse();
  }

  @Test
  void aChunkComingWellAfterTheLastReplyCertainlyRunsTheTimer() {
    answeredAtOnce(RESPONSE_BODY);
    advance(SLACK);
    timers.received(RESPONSE_BODY);
    advance(1_000);
    timers.replied(RESPONSE_BODY);
    assertThat(endedAfter(1)).isTrue();
  }

  // ---------------------------------------------------------------------------------------------
  // override_message_timeout

  @Test
  void anExtendedTimerRunsOutAtTheExtension() {
    timers.received(RESPONSE_BODY);
    advance(10);
    timers.extended(1_000);
    advance(EXTENSION_RUNS_OUT - 1);
    assertThat(timers.gaveUp()).as("a client hang-up during the extended wait").isFalse();
    advance(1);
    assertThat(timers.gaveUp()).isTrue();
  }

  @Test
  void aTimerIsExtendedOncePerMessage() {
    timers.received(RESPONSE_BODY);
    timers.extended(1_000);
    timers.extended(5_000); // ignored by Envoy
    assertThat(endedAfter(1_000)).isTrue();
  }

  @Test
  void aNewMessageMayBeExtendedAgain() {
    timers.received(RESPONSE_BODY);
    timers.extended(1_000);
    advance(100);
    timers.received(RESPONSE_BODY);
    timers.extended(1_000);
    assertThat(endedAfter(EXTENSION_RUNS_OUT - 1)).isFalse();
  }

  @Test
  void anExtensionWithoutARunningTimerIsIgnored() {
    answeredAtOnce(RESPONSE_BODY);
    timers.extended(1_000);
    advance(SLACK);
    timers.received(RESPONSE_BODY);
    assertThat(endedAfter(RUNS_OUT)).isTrue();
  }

  @Test
  void theRequestDirectionsTimerIsExtendedFirst() {
    timers.received(REQUEST_BODY);
    timers.received(RESPONSE_HEADERS);
    timers.extended(1_000);
    assertThat(endedAfter(RUNS_OUT)).as("the response headers' timer ran its 200 ms").isTrue();
  }

  @Test
  void anExtensionSentAfterTheTimerRanOutIsTooLate() {
    timers.received(RESPONSE_BODY);
    advance(RUNS_OUT);
    timers.extended(1_000);
    timers.replied(RESPONSE_BODY);
    assertThat(endedAfter(0)).isTrue();
  }
}
