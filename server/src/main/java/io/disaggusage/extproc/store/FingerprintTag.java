package io.disaggusage.extproc.store;

import io.disaggusage.extproc.classify.PromptFingerprint;
import java.util.HexFormat;

/**
 * A fingerprint as the stores spell it in keys, values and wake-ups: its 32 hex digits, or {@code -} for
 * a leg whose body was not read (unbound). The two forms never equal each other, so an unbound leg and a
 * bound one never match, whichever of them stored the usage.
 */
final class FingerprintTag {
  /** The tag of a leg without a fingerprint; not a hex digit, so no fingerprint's tag. */
  static final String UNBOUND = "-";

  private static final HexFormat HEX = HexFormat.of();

  private FingerprintTag() {}

  /**
   * The same text as {@link PromptFingerprint#hex()}, without its {@code String.format}: this runs on
   * every put and lookup, where a format call cost more than the memory store's own work.
   */
  static String of(PromptFingerprint fingerprint) {
    return fingerprint == null ? UNBOUND : HEX.toHexDigits(fingerprint.high()) + HEX.toHexDigits(fingerprint.low());
  }
}
