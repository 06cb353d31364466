package io.disaggusage.extproc.exchange;

/** A response body processor for the context leg: forwards every byte and reads the usage. */
public interface ContextObserver extends ResponseBodyProcessor {

  /**
   * What the body yielded; final once {@link #settled()} (or after {@link #finish}).
   */
  ContextObservation observation();

  /**
   * True once nothing that can still arrive may change the {@link #observation()}: the JSON
   * document's root object has closed, or the event stream's last event has been seen. The body
   * itself may not have ended: Envoy often sends its end as a message of its own, and a client that
   * knows the body's length has the whole response before that message is answered. The usage is
   * stored at this point, so the store write lands before the client can have the response.
   */
  boolean settled();
}
