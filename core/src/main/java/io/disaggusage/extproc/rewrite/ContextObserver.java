package io.disaggusage.extproc.rewrite;

/** A response body processor for the context leg: forwards every byte and reads the usage. */
public interface ContextObserver extends ResponseBodyProcessor {

  /**
   * What the body yielded; final once {@link #contentEnded()} (nothing that can still arrive changes
   * it), or after {@link #finish}.
   */
  ContextObservation observation();

  /**
   * True once the body's content is complete although the body itself may not have ended: the JSON
   * document's root object has closed, or the event stream's last event ({@code [DONE]}, ...) has
   * been read. Only the end of the body can follow, and Envoy often sends it as a message of its own,
   * which a client that knows the body's length does not wait for.
   */
  boolean contentEnded();
}
