package io.disaggusage.e2e;

import java.util.concurrent.atomic.AtomicLong;

/**
 * {@code get_global_disagg_request_id}'s snowflake layout (engines.md §1.3): 0 | milliseconds (39 bits) |
 * node (8) | process (6) | counter (10). The ids land far above 2^53, so a reader that goes through a
 * double loses them; that is the point of using the real layout rather than small numbers.
 */
final class DisaggRequestIds {
  /** An epoch close to now keeps the millisecond field inside its 39 bits. */
  private static final long EPOCH_MILLIS = 1_735_689_600_000L; // 2025-01-01T00:00:00Z

  private final long node;
  private final AtomicLong counter = new AtomicLong();

  DisaggRequestIds(int node) {
    this.node = node & 0xff;
  }

  long next() {
    long millis = (System.currentTimeMillis() - EPOCH_MILLIS) & ((1L << 39) - 1);
    return (millis << 24) | (node << 16) | (counter.getAndIncrement() & 0x3ff);
  }
}
