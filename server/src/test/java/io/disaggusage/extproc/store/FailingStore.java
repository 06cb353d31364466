package io.disaggusage.extproc.store;

import io.disaggusage.extproc.classify.CorrelationKey;
import io.disaggusage.extproc.classify.PromptFingerprint;
import io.disaggusage.extproc.usage.ContextUsage;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.function.Supplier;

/**
 * A store that is down: every put, take and await fails with a new exception of the kind given for it
 * (made at the call, as a real store's would be), as a failed future, or the take thrown at the caller
 * (a store that breaks its contract) where asked.
 */
public final class FailingStore extends ForwardingStore {
  private final Supplier<RuntimeException> put;
  private final Supplier<RuntimeException> take;
  private final Supplier<RuntimeException> await;
  private final boolean takeThrows;

  private FailingStore(
      ContextUsageStore real, Supplier<RuntimeException> put, Supplier<RuntimeException> take, Supplier<RuntimeException> await,
      boolean takeThrows) {
    super(real);
    this.put = put;
    this.take = take;
    this.await = await;
    this.takeThrows = takeThrows;
  }

  /** Every call's future fails with the exception given for it. */
  public static FailingStore failing(
      ContextUsageStore real, Supplier<RuntimeException> put, Supplier<RuntimeException> take, Supplier<RuntimeException> await) {
    return new FailingStore(real, put, take, await, false);
  }

  /** Every call fails with {@code down}; the take throws it instead of returning a future. */
  public static FailingStore throwingOnTake(ContextUsageStore real, Supplier<RuntimeException> down) {
    return new FailingStore(real, down, down, down, true);
  }

  @Override
  public CompletableFuture<Void> put(List<CorrelationKey> keys, PromptFingerprint fingerprint, ContextUsage usage) {
    return CompletableFuture.failedFuture(put.get());
  }

  @Override
  public CompletableFuture<ContextLookup> take(List<CorrelationKey> keys, PromptFingerprint fingerprint) {
    if (takeThrows) {
      throw take.get();
    }
    return CompletableFuture.failedFuture(take.get());
  }

  @Override
  public CompletableFuture<ContextLookup> await(List<CorrelationKey> keys, PromptFingerprint fingerprint, Duration timeout) {
    return CompletableFuture.failedFuture(await.get());
  }
}
