package io.disaggusage.extproc.stream;

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
 * <p>Envoy runs one timer per direction (its debug log: "200 ms timer enabled", "timer disabled"). Each
 * message it sends that waits for a reply starts it again; any reply of that direction it receives
 * stops it, also a reply to an earlier message; one {@code override_message_timeout} per message
 * restarts it with the longer duration. The {@link ReplyQueue} reports what it receives and sends; the
 * stream's {@link ExchangeRecord} asks {@link #gaveUp()} when it counts. Envoy gave up when, by this
 * clock:
 *
 * <ul>
 *   <li>the stream ended while a direction's timer had run out: a reply was owed that long;
 *   <li>a reply (or a timer extension) went out after its direction's timer had run out: Envoy had
 *       passed the rest of the exchange on already and ignores it. A frozen or starved process
 *       answering in a burst after it thaws shows up so.
 * </ul>
 *
 * <p>What the service cannot see is the order in which a reply and a message crossed on the wire.
 * Envoy sends body chunks without waiting for replies: a chunk it sent just before our reply to the
 * previous one arrived runs no timer (the reply stopped it), one it sent just after does. Envoy 1.40
 * sent a context response's two data messages and its empty end within a millisecond and got the
 * reply to the first 3 ms later: it then waited a second for the held reply to the second without a
 * timer. So a message that comes less than the slack (below) after a reply of its direction went out
 * is <em>uncertain</em>: its reply going out late proves nothing, and the stream ending counts as
 * Envoy giving up only when it ends about when the timer would have run out — within {@value
 * #LATE_END_PERCENT} % of the timeout after — since Envoy ends the stream at once when it gives up;
 * an end long after means Envoy ran no timer for it. (An empty end-of-stream message right behind the
 * last data is the common case: "Envoy runs no timer for it" is this crossing.)
 *
 * <p>Times are taken when the service receives and sends, so Envoy's timer starts a little earlier than
 * here; and Envoy arms it from the time its event loop cached when the iteration began, so it fires a
 * little early besides (Envoy 1.40 logged 199 ms for its 200 ms timer, and the service measured less
 * between reading the message and hearing the stream end). A timer therefore counts as run out here
 * {@value #SLACK_PERCENT} % of the timeout short of its duration. The service does not see a timer
 * that ran out before it read the message at all (a message that waited in the socket while the
 * process was frozen), nor, for an uncertain message, a give-up it hears of only long after (a freeze
 * again). A message arriving after the timer would have run out restarts it without counting: Envoy
 * may have sent it just in time. The model follows Envoy as configured in the shipped settings: it
 * takes every extension as honoured ({@code max_message_timeout} large enough).
 *
 * <p>Guarded by the owning stream's monitor. Three small objects per stream; never blocks.
 */
final class EnvoyTimers {
  /**
   * In percent of the timeout: how much earlier than its duration a timer counts as run out here, and
   * how soon after a reply of its direction a message may have crossed that reply.
   */
  static final int SLACK_PERCENT = 10;
  /** In percent of the timeout: how late after the timer would have run out the stream may end for an uncertain message to count. */
  static final int LATE_END_PERCENT = 25;

  /** One direction's timer, as far as the service can follow it. */
  private static final class Timer {
    /** A message Envoy may time is owed its reply, and no reply of this direction went out since. */
    boolean running;
    /** Envoy certainly runs the timer: no reply of this direction went out just before the message came. */
    boolean certain;
    boolean extended;
    /** When the timer counts as run out ({@link System#nanoTime()} scale), while running. */
    long deadline;
    boolean replied;
    long lastReply;

    boolean ranOut(long now) {
      return running && now - deadline >= 0;
    }
  }

  private final long timeoutNanos;
  private final long slackNanos;
  private final long lateEndNanos;
  private final LongSupplier nanoClock;
  private final Timer request = new Timer();
  private final Timer response = new Timer();
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
    this.slackNanos = timeoutNanos / 100 * SLACK_PERCENT;
    this.lateEndNanos = timeoutNanos / 100 * LATE_END_PERCENT;
    this.nanoClock = nanoClock;
  }

  /** Envoy sent a message of {@code kind} that waits for a reply: its direction's timer starts again. */
  void received(ProcessingRequest.RequestCase kind) {
    Timer timer = timer(kind);
    if (ended || timer == null) {
      return;
    }
    long now = nanoClock.getAsLong();
    timer.running = true;
    timer.certain = !timer.replied || now - timer.lastReply >= slackNanos;
    timer.extended = false;
    timer.deadline = now + timeoutNanos - slackNanos;
  }

  /** A reply to a message of {@code kind} goes out now: it stops its direction's timer. */
  void replied(ProcessingRequest.RequestCase kind) {
    Timer timer = timer(kind);
    if (ended || timer == null) {
      return;
    }
    long now = nanoClock.getAsLong();
    noteCertainlyRanOut(now);
    timer.running = false;
    timer.replied = true;
    timer.lastReply = now;
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
    noteCertainlyRanOut(now);
    Timer timer = extensible(request) ? request : extensible(response) ? response : null;
    if (timer != null) {
      timer.extended = true;
      timer.deadline = now + TimeUnit.MILLISECONDS.toNanos(millis) - slackNanos;
    }
  }

  private static boolean extensible(Timer timer) {
    return timer.running && !timer.extended;
  }

  /** The stream ended: what {@link #gaveUp()} says from now on is decided. */
  void ended() {
    if (ended) {
      return;
    }
    long now = nanoClock.getAsLong();
    noteCertainlyRanOut(now);
    if (endedByTimeout(request, now) || endedByTimeout(response, now)) {
      gaveUp = true;
    }
    ended = true;
  }

  /** An uncertain timer's stream ended about when the timer would have run out: Envoy ended it. */
  private boolean endedByTimeout(Timer timer, long now) {
    return timer.ranOut(now) && now - timer.deadline < lateEndNanos;
  }

  /**
   * Whether Envoy gave up on the service: the stream ended with a reply overdue, or a reply went out
   * after its timer had run out — or one is overdue now, so the reply about to go out is too late.
   */
  boolean gaveUp() {
    if (!ended) {
      noteCertainlyRanOut(nanoClock.getAsLong());
    }
    return gaveUp;
  }

  private void noteCertainlyRanOut(long now) {
    if ((request.certain && request.ranOut(now)) || (response.certain && response.ranOut(now))) {
      gaveUp = true;
    }
  }

  private Timer timer(ProcessingRequest.RequestCase kind) {
    return switch (kind) {
      case REQUEST_HEADERS, REQUEST_BODY, REQUEST_TRAILERS -> request;
      case RESPONSE_HEADERS, RESPONSE_BODY, RESPONSE_TRAILERS -> response;
      default -> null;
    };
  }
}
