package io.disaggusage.extproc.rewrite;

/**
 * The body filter: handles one response body, chunk by chunk, with no knowledge of gRPC or Envoy.
 * The caller feeds chunks in order and asks after each for the bytes ready to go out
 * ({@link #takeReady}). Bytes leave in the order they came. What a leg needs beyond filtering is a
 * capability of its own: {@link GenerationRewriter} (context usage), {@link ContextObserver} (the usage
 * read).
 */
public interface ResponseBodyProcessor {

  /** Consumes one body chunk. */
  void accept(byte[] chunk);

  /** The body ended (after the last {@link #accept}). */
  void finish();

  /** Bytes that may be forwarded now, in order; an empty array when everything is held. */
  byte[] takeReady();

  /**
   * Gives up (internal error): returns every held byte as it arrived, not yet forwarded, so the
   * caller can let the traffic through unmodified. The processor is unusable afterwards.
   */
  byte[] abandon();

  /** How the body was handled so far; final after {@link #finish} and release of all bytes. */
  ExchangeReport report();
}
