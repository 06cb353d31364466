package io.disaggusage.extproc.store;

import io.disaggusage.extproc.usage.ContextUsage;
import java.util.Optional;

/**
 * What a generation leg's lookup found: its own context usage, nothing under its keys, or entries under
 * its keys that belong to other flows (another fingerprint). The last two both pass the exchange through;
 * they are told apart because a mismatch is a colliding or forged key, worth its own outcome and warning.
 */
public record ContextLookup(Optional<ContextUsage> usage, boolean otherFingerprints) {
  /** No entry under any of the keys. */
  public static final ContextLookup MISS = new ContextLookup(Optional.empty(), false);
  /** Entries under the keys, none bound to the leg's fingerprint. */
  public static final ContextLookup MISMATCH = new ContextLookup(Optional.empty(), true);

  public static ContextLookup found(ContextUsage usage) {
    return new ContextLookup(Optional.of(usage), false);
  }

  /** Nothing of this flow found: a miss or a mismatch, as {@code otherFingerprints} says. */
  public static ContextLookup notFound(boolean otherFingerprints) {
    return otherFingerprints ? MISMATCH : MISS;
  }

  public boolean isFound() {
    return usage.isPresent();
  }

  /** True when entries of other flows were there and none of this one: the {@code fingerprint_mismatch} case. */
  public boolean isMismatch() {
    return usage.isEmpty() && otherFingerprints;
  }
}
