package io.disaggusage.extproc.stream;

import com.google.protobuf.ByteString;
import com.google.protobuf.Struct;
import io.disaggusage.extproc.rewrite.Bytes;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingRequest;
import io.envoyproxy.envoy.service.ext_proc.v3.ProcessingResponse;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.StreamObserver;
import java.util.ArrayDeque;
import java.util.Arrays;

/**
 * The replies owed to Envoy on one stream, one per message, sent in the order the messages came (a
 * reply that waits holds back the ones behind it), and the one ledger of response body bytes owed
 * back if the exchange fails (behaviour.md §6).
 *
 * <p>The ledger has two entries. Bytes taken from a body filter for a reply not yet built are owed by
 * that reply's {@link Slot} ({@link #owe}); on a failure they go out in the reply to the body message
 * being handled, or in the {@link #hold held} reply, followed by what the filter still held. With
 * neither, they are given back with the next response body message ({@link #forward}).
 *
 * <p>What it receives and sends, and the stream's end, it reports to the stream's {@link EnvoyTimers}.
 * Guarded by the owning stream's monitor.
 */
final class ReplyQueue {

  /** One reply owed to Envoy; filled in now or later, sent in order. */
  static final class Slot {
    /** The message this reply answers: a failure fills an unanswered slot with that message's neutral reply. */
    private final ProcessingRequest.RequestCase answers;
    private ProcessingResponse reply;
    /** Bytes taken from the body filter for this reply, not yet in it. */
    private byte[] owed = Bytes.EMPTY;

    private Slot(ProcessingRequest.RequestCase answers) {
      this.answers = answers;
    }

    /** Whether the reply is filled in. */
    boolean answered() {
      return reply != null;
    }
  }

  /** Who hears what the queue does on its own: the owning stream (no lambdas: one object less each). */
  interface Listener {
    /** Response body bytes were put into a reply (the summary line's bytes_out). */
    void sent(int bytes);

    /** Envoy cancelled the stream under a reply being sent. */
    void gone();
  }

  private final StreamObserver<ProcessingResponse> out;
  private final Listener listener;
  private final EnvoyTimers timers;
  // Rarely more than a reply or two are owed at once; the deque grows when a held reply queues more.
  private final ArrayDeque<Slot> slots = new ArrayDeque<>(4);
  private boolean closed;
  /** The body reply that waits (for the context usage, a store write) and carries bytes on failure. */
  private Slot held;
  /** Owed bytes without a reply to carry them: they go out with the next response body message. */
  private byte[] giveBack = Bytes.EMPTY;

  ReplyQueue(StreamObserver<ProcessingResponse> out, Listener listener, EnvoyTimers timers) {
    this.out = out;
    this.listener = listener;
    this.timers = timers;
  }

  /** Owes a reply for a message just received. */
  Slot open(ProcessingRequest message) {
    return open(message.getRequestCase());
  }

  /** Owes a reply for a message of kind {@code answers} just received. */
  Slot open(ProcessingRequest.RequestCase answers) {
    timers.received(answers);
    Slot slot = new Slot(answers);
    slots.add(slot);
    return slot;
  }

  /** Fills in a reply and sends every reply that is ready in order. */
  void complete(Slot slot, ProcessingResponse reply) {
    slot.reply = reply;
    if (held == slot) {
      held = null;
    }
    flush();
  }

  /** Records bytes taken from the body filter for {@code slot}'s reply; returns all it owes so far. */
  byte[] owe(Slot slot, byte[] bytes) {
    slot.owed = Bytes.concat(slot.owed, bytes);
    return slot.owed;
  }

  /**
   * Marks {@code slot} as the body reply that waits: on a failure before it is completed it carries
   * the bytes it owes and those the filter still holds.
   */
  void hold(Slot slot) {
    held = slot;
  }

  /** The body reply that waits, or null. */
  Slot held() {
    return held;
  }

  /**
   * A response body reply carrying {@code output}; it forwards the chunk untouched when the output is
   * exactly the {@code original} input (null: always replaced).
   */
  ProcessingResponse bodyReply(byte[] original, byte[] output, Struct metadata) {
    listener.sent(output.length);
    if (original != null && Arrays.equals(original, output)) {
      return EnvoyMessages.body(false, null, metadata);
    }
    return EnvoyMessages.body(false, BodyBytes.wrap(output), metadata);
  }

  /**
   * Answers a response body message that is not filtered: the chunk as it came, after any bytes given
   * back by an earlier failure.
   */
  void forward(Slot slot, ByteString chunk) {
    if (giveBack.length == 0) {
      listener.sent(chunk.size());
      complete(slot, EnvoyMessages.body(false, null, null));
      return;
    }
    byte[] owedNow = Bytes.concat(giveBack, BodyBytes.of(chunk));
    giveBack = Bytes.EMPTY;
    listener.sent(owedNow.length);
    complete(slot, EnvoyMessages.body(false, BodyBytes.wrap(owedNow), null));
  }

  /**
   * Lets the exchange through unmodified after an internal error: the bytes owed and {@code filterHeld}
   * go out with the held reply, or else with the reply to {@code current} if that is an unanswered
   * response body message, or else with the next response body message; every other reply owed passes
   * things through as they are, each the neutral reply to the kind of message it answers (a response
   * headers reply still waiting for a store lookup stays a headers reply).
   *
   * @param request the message being handled when the error happened, or null (a store or timer result)
   * @param current its slot, or null
   */
  void failOpen(byte[] filterHeld, ProcessingRequest request, Slot current) {
    Slot bodySlot = held;
    held = null;
    if (bodySlot == null
        && current != null
        && current.reply == null
        && request != null
        && request.hasResponseBody()) {
      bodySlot = current;
    }
    if (bodySlot != null) {
      // Bytes already taken for the reply come before those the filter still holds.
      byte[] owedNow = Bytes.concat(bodySlot.owed, filterHeld);
      listener.sent(owedNow.length);
      bodySlot.reply = EnvoyMessages.body(false, BodyBytes.wrap(owedNow), null);
    } else {
      giveBack = filterHeld;
    }
    for (Slot slot : slots) {
      if (slot.reply == null) {
        slot.reply = passThroughReply(slot.answers);
      }
    }
    flush();
  }

  /** The neutral reply for a message after a failure. */
  private static ProcessingResponse passThroughReply(ProcessingRequest.RequestCase answers) {
    return switch (answers) {
      case REQUEST_HEADERS -> EnvoyMessages.requestHeaders(null, null);
      case RESPONSE_HEADERS -> EnvoyMessages.responseHeaders(null, null, null);
      case REQUEST_BODY -> EnvoyMessages.body(true, null, null);
      case REQUEST_TRAILERS -> EnvoyMessages.trailers(true);
      case RESPONSE_TRAILERS -> EnvoyMessages.trailers(false);
      default -> EnvoyMessages.body(false, null, null);
    };
  }

  /** Asks Envoy at once to run the timer of the message it waits on for {@code millis} from now. */
  void extendTimer(long millis) {
    if (!closed) {
      timers.extended(millis);
      send(EnvoyMessages.extendTimer(millis));
    }
  }

  private void send(ProcessingResponse reply) {
    if (closed) {
      return;
    }
    try {
      out.onNext(reply);
    } catch (StatusRuntimeException e) {
      // Envoy cancelled the stream (client gone) while a deferred reply was being produced: nothing
      // left to answer; the cancellation itself arrives through onError.
      listener.gone();
    }
  }

  private void flush() {
    while (!slots.isEmpty() && slots.peek().reply != null) {
      Slot slot = slots.poll();
      if (!closed) {
        timers.replied(slot.answers);
      }
      send(slot.reply);
    }
  }

  /** Sends nothing more, and settles whether Envoy gave up; false when already closed. */
  boolean close() {
    if (closed) {
      return false;
    }
    closed = true;
    timers.ended();
    return true;
  }

  boolean closed() {
    return closed;
  }
}
