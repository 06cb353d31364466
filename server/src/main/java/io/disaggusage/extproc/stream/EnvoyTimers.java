package io.disaggusage.extproc.stream;

import io.envoyproxy.envoy.service.ext_proc.v3.HttpBody;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;

/**
 * Envoy's message timers on one stream, followed from the service's side, for one question: did Envoy
 * give up on the service ({@code envoy_gave_up}), or did the exchange end for another reason ({@code
 * reset})? The stream's end cannot tell: on its message timeout, as when the client hangs up, Envoy
 * half-closes the stream and then cancels it. What differs is that Envoy gives up only while a reply
 * has been owed to it for its whole {@code message_timeout} ({@code grpc.envoy_message_timeout}).
 *
 * <p>Envoy runs one timer per direction. Each message it sends that waits for a reply starts it again;
 * any reply of that direction stops it; one {@code override_message_timeout} per message restarts it
 * with the longer duration. An empty end-of-stream body message starts none (Envoy ignores an override
 * then). The {@link ReplyQueue} reports what it receives and sends; the stream's {@link ExchangeRecord}
 * asks {@link #gaveUp()} when it counts. Envoy gave up when, by this clock:
 *
 * <ul>
 *   <li>the stream ended while a direction's timer had run out: a reply was owed that long;
 *   <li>a reply (or a timer extension) went out after its direction's timer had run out: Envoy had
 *       passed the rest of the exchange on already and ignores it. A frozen or starved process
 *       answering in a burst after it thaws shows up so.
 * </ul>
 *
 * <p>Times are taken when the service receives and sends, so Envoy's timer starts a little earlier than
 * here and a reply reaches it a little later: the service may miss a timer that ran out by a hair, and
 * does not see one that ran out before it read the message at all (a message that waited in the socket
 * while the process was frozen). A message arriving after the timer would have run out restarts it
 * without counting: Envoy may have sent it just in time. The model follows Envoy as configured in the
 * shipped settings: it takes every extension as honoured ({@code max_message_timeout} large enough).
 *
 * <p>Guarded by the owning stream's monitor. A fixed handful of fields per stream; never blocks.
 */
final class EnvoyTimers {
  private final long timeoutNanos;
  private final LongSupplier nanoClock;

  private boolean requestRunning;
  private boolean requestExtended;
  /** When the request direction's timer runs out ({@link System#nanoTime()} scale), while running. */
  private long requestDeadline;
  private boolean responseRunning;
  private boolean responseExtended;
  private long responseDeadline;
  private boolean gaveUp;
  private boolean ended;

  /** Timers of {@code messageTimeout}, timed by {@link System#nanoTime()}. */
  EnvoyTimers(Duration messageTimeout) {
    this(messageTimeout, System::nanoTime);
  }

  /**
   * @param messageTimeout the filter's {@code message_timeout}
   * @param nanoClock monotonic nanoseconds, as {@link System#nanoTime()}
   */
  EnvoyTimers(Duration messageTimeout, LongSupplier nanoClock) {
    this.timeoutNanos = messageTimeout.toNanos();
    this.nanoClock = nanoClock;
  }

  /** Whether Envoy runs its message timer for {@code message}: all but an empty end-of-stream body. */
  static boolean timed(ProcessingRequest message) {
    return switch (message.getRequestCase()) {
      case REQUEST_BODY -> !emptyEnd(message.getRequestBody());
      case RESPONSE_BODY -> !emptyEnd(message.getResponseBody());
      default -> true;
    };
  }

  private static boolean emptyEnd(HttpBody body) {
    return body.getEndOfStream() && body.getBody().isEmpty();
  }

  /**
   * Envoy sent a message of {@code kind} that waits for a reply; {@code timed}: one Envoy runs its timer
   * for ({@link #timed(ProcessingRequest)}).
   */
  void received(ProcessingRequest.RequestCase kind, boolean timed) {
    if (ended || !timed) {
      return;
    }
    long deadline = nanoClock.getAsLong() + timeoutNanos;
    if (isRequest(kind)) {
      requestRunning = true;
      requestExtended = false;
      requestDeadline = deadline;
    } else if (isResponse(kind)) {
      responseRunning = true;
      responseExtended = false;
      responseDeadline = deadline;
    }
  }

  /** A reply to a message of {@code kind} goes out now: it stops its direction's timer. */
  void replied(ProcessingRequest.RequestCase kind) {
    if (ended) {
      return;
    }
    noteOverdue(nanoClock.getAsLong());
    if (isRequest(kind)) {
      requestRunning = false;
    } else if (isResponse(kind)) {
      responseRunning = false;
    }
  }

  /**
   * An {@code override_message_timeout} of {@code millis} goes out now. Envoy applies it to the request
   * direction's timer if that runs and was not extended since its message, else to the response
   * direction's on the same terms, else ignores it.
   */
  void extended(long millis) {
    if (ended) {
      return;
    }
    long now = nanoClock.getAsLong();
    noteOverdue(now);
    long deadline = now + TimeUnit.MILLISECONDS.toNanos(millis);
    if (requestRunning && !requestExtended) {
      requestExtended = true;
      requestDeadline = deadline;
    } else if (responseRunning && !responseExtended) {
      responseExtended = true;
      responseDeadline = deadline;
    }
  }

  /** The stream ended: what {@link #gaveUp()} says from now on is decided. */
  void ended() {
    if (!ended) {
      noteOverdue(nanoClock.getAsLong());
      ended = true;
    }
  }

  /**
   * Whether Envoy gave up on the service: the stream ended with a reply overdue, or a reply went out
   * after its timer had run out — or one is overdue now, so the reply about to go out is too late.
   */
  boolean gaveUp() {
    if (!ended) {
      noteOverdue(nanoClock.getAsLong());
    }
    return gaveUp;
  }

  private void noteOverdue(long now) {
    if ((requestRunning && now - requestDeadline >= 0) || (responseRunning && now - responseDeadline >= 0)) {
      gaveUp = true;
    }
  }

  private static boolean isRequest(ProcessingRequest.RequestCase kind) {
    return switch (kind) {
      case REQUEST_HEADERS, REQUEST_BODY, REQUEST_TRAILERS -> true;
      default -> false;
    };
  }

  private static boolean isResponse(ProcessingRequest.RequestCase kind) {
    return switch (kind) {
      case RESPONSE_HEADERS, RESPONSE_BODY, RESPONSE_TRAILERS -> true;
      default -> false;
    };
  }
}
