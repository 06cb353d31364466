package io.disaggusage.extproc.stream;

import io.disaggusage.extproc.classify.CorrelationKey;
import io.disaggusage.extproc.exchange.Phase;
import io.disaggusage.extproc.logging.RateLimitedLog;
import java.time.Duration;
import java.util.concurrent.CompletionException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The per-exchange warnings, each kind at most once per {@link #INTERVAL} per service, with the count of
 * the ones dropped in between on the next line. They name exception classes and frames only: an
 * exception message could quote body bytes or client-supplied ids.
 */
final class ExchangeWarnings {
  /** At most one warning of a kind per this interval. */
  static final Duration INTERVAL = Duration.ofSeconds(10);

  private static final Logger log = LoggerFactory.getLogger(ExchangeStream.class);

  /** An exception inside the stream state machine: the exchange was let through unmodified. */
  final RateLimitedLog internalError = new RateLimitedLog(log, 1, INTERVAL);
  /** The store failed to save a context response's usage. */
  final RateLimitedLog storeWrite = new RateLimitedLog(log, 1, INTERVAL);
  /** The store failed to look up or wait for context usage. */
  final RateLimitedLog storeRead = new RateLimitedLog(log, 1, INTERVAL);
  /** A generation leg's keys held only other flows' context usage. */
  final RateLimitedLog fingerprintMismatch = new RateLimitedLog(log, 1, INTERVAL);
  /** A request carried inputs the classifier did not follow (forged or contradicted). */
  final RateLimitedLog refused = new RateLimitedLog(log, 1, INTERVAL);

  void internalError(RuntimeException e) {
    StackTraceElement at = e.getStackTrace().length > 0 ? e.getStackTrace()[0] : null;
    internalError.warn(
        "exchange let through unmodified after an internal error: {} at {}", e.getClass().getName(), at);
  }

  void storeWriteFailed(Throwable error) {
    storeWrite.warn(
        "context usage not stored, its generation exchange will pass through: store failed with {}",
        className(error));
  }

  void storeReadFailed(Throwable error) {
    storeRead.warn(
        "context usage lookup failed, generation exchange passed through: store failed with {}",
        className(error));
  }

  /**
   * Names the key's source only: the key's value is client-supplied (and may be forged), and the
   * fingerprint stands for a prompt.
   */
  void fingerprintMismatch(CorrelationKey.Source source) {
    fingerprintMismatch.warn(
        "context usage under this {} key belongs to another prompt (a shared or forged key): generation"
            + " exchange passed through",
        source.description());
  }

  /**
   * Names the refused inputs and the phase decided, never their values: a client chose them. The
   * exchange's access-log metadata carries the same labels ({@code refused_inputs}).
   */
  void refused(String inputs, Phase phase) {
    refused.warn(
        "request inputs not followed (a client's, contradicted by the cluster or a body marker, or not"
            + " allowed to decide): {}; exchange classified as {}",
        inputs,
        phase.label());
  }

  private static String className(Throwable error) {
    Throwable cause = error instanceof CompletionException && error.getCause() != null ? error.getCause() : error;
    return cause.getClass().getName();
  }
}
