package io.disaggusage.extproc.emulator.envoy;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/** A row of one-shot gates (one per chunk, plus one for trailers) released in order by a test. */
final class Gates {
  private final List<CompletableFuture<Void>> gates = new ArrayList<>();
  private int next;

  Gates(int count, boolean closed) {
    for (int i = 0; i < count; i++) {
      gates.add(closed ? new CompletableFuture<>() : CompletableFuture.completedFuture(null));
    }
    next = closed ? 0 : count;
  }

  CompletableFuture<Void> gate(int index) {
    return gates.get(index);
  }

  /** Opens the next closed gate; returns false when all are open. */
  synchronized boolean releaseNext() {
    if (next >= gates.size()) {
      return false;
    }
    gates.get(next++).complete(null);
    return true;
  }

  /**
   * Opens every closed gate, the last first: a chunk's delivery, which runs on the loop as soon as its
   * gate opens, must already see every later gate open (an empty last chunk then comes in the same
   * codec event as the chunk before it, as when all of a body is there at once).
   */
  synchronized void releaseAll() {
    for (int i = gates.size() - 1; i >= next; i--) {
      gates.get(i).complete(null);
    }
    next = gates.size();
  }

  synchronized int remaining() {
    return gates.size() - next;
  }
}
