package io.disaggusage.extproc.exchange;

/** A response body processor for the context leg: forwards every byte and reads the usage. */
public interface ContextObserver extends ResponseBodyProcessor {

  /** What the body yielded; meaningful after {@link #finish}. */
  ContextObservation observation();
}
