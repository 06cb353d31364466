package io.disaggusage.extproc.stream;

import io.disaggusage.extproc.exchange.Phase;
import io.envoyproxy.envoy.service.ext_proc.v3.HttpBody;

/**
 * What an exchange does with its response body, one object per phase, chosen at the response headers
 * with everything the classification decided: {@link PassThroughLeg}, {@link ContextLeg},
 * {@link GenerationLeg}. Called under the owning stream's monitor.
 */
interface Leg {

  /** What a leg works with: the stream's services, replies and record, and its monitor. */
  record Tools(ExchangeServices services, ReplyQueue replies, ExchangeRecord record, Host host) {}

  /** The stream a leg belongs to, for the results (store, timer) that arrive on other threads. */
  interface Host {
    /**
     * Runs {@code work} under the stream's monitor; an internal error in it lets the exchange through
     * unmodified (behaviour.md §6).
     */
    void resume(Runnable work);

    /** Whether the stream has ended (Envoy reset or completed it). */
    boolean closed();
  }

  /** One response body chunk; {@code slot} is owed its reply. */
  void onBody(HttpBody chunk, ReplyQueue.Slot slot);

  /**
   * Gives up (internal error): returns the bytes held back, unchanged, and does nothing more; results
   * that arrive later are ignored.
   */
  byte[] abandon();

  /**
   * The stream ended: withdraws what still waits and counts an exchange not counted yet (most often a
   * client that hung up: {@code reset}; the {@link ExchangeRecord} makes it {@code envoy_gave_up} when
   * Envoy's message timer ran out instead).
   *
   * @param uncounted the phase the request was classified with when the exchange has not been counted,
   *     else null
   */
  void streamEnded(Phase uncounted);
}
