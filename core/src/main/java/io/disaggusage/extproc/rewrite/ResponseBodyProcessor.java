package io.disaggusage.extproc.rewrite;

import io.disaggusage.extproc.usage.ContextUsage;

/**
 * Handles one response body, chunk by chunk, with no knowledge of gRPC or Envoy. The caller feeds
 * chunks in order, asks after each for the bytes ready to go out ({@link #takeReady}), and supplies
 * context usage when the processor asks for it. Bytes leave in the order they came.
 */
public interface ResponseBodyProcessor {

  /** Consumes one body chunk. */
  void accept(byte[] chunk);

  /** The body ended (after the last {@link #accept}). */
  void finish();

  /** Bytes that may be forwarded now, in order; an empty array when everything is held. */
  byte[] takeReady();

  /**
   * True once the processor holds bytes that need the context usage and has not been given it yet:
   * the caller starts (once) an asynchronous wait and later calls {@link #resolveContext}.
   */
  boolean wantsContext();

  /** True while held bytes still wait for {@link #resolveContext}. */
  boolean waiting();

  /**
   * Supplies the context usage, or null when there is none (deadline passed, or the flow has no
   * context phase): held bytes are then released under the fallback.
   */
  void resolveContext(ContextUsage context, Outcome reasonIfNull);

  /**
   * Gives up (internal error): returns every held byte as it arrived, not yet forwarded, so the
   * caller can let the traffic through unmodified. The processor is unusable afterwards.
   */
  byte[] abandon();

  /**
   * How many usage-bearing events (or usage objects) have left through {@link #takeReady} so far. Once
   * one has, the client may have read its usage and hang up before the body ends (sglang-router closes
   * right after {@code data: [DONE]}): the caller publishes {@link #report} with that reply.
   */
  default int usageReleased() {
    return 0;
  }

  /** How the body was handled so far; final after {@link #finish} and release of all bytes. */
  ExchangeReport report();
}
