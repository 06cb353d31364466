package io.disaggusage.extproc.store;

import io.disaggusage.extproc.classify.CorrelationKey;
import io.disaggusage.extproc.classify.PromptFingerprint;
import io.disaggusage.extproc.usage.ContextUsage;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/** A store in front of a real one that passes every call on; tests override what they change. */
public abstract class ForwardingStore implements ContextUsageStore {
  protected final ContextUsageStore real;

  protected ForwardingStore(ContextUsageStore real) {
    this.real = real;
  }

  @Override
  public CompletableFuture<Void> put(List<CorrelationKey> keys, PromptFingerprint fingerprint, ContextUsage usage) {
    return real.put(keys, fingerprint, usage);
  }

  @Override
  public CompletableFuture<ContextLookup> take(List<CorrelationKey> keys, PromptFingerprint fingerprint) {
    return real.take(keys, fingerprint);
  }

  @Override
  public CompletableFuture<ContextLookup> await(
      List<CorrelationKey> keys, PromptFingerprint fingerprint, Duration timeout) {
    return real.await(keys, fingerprint, timeout);
  }

  @Override
  public long size() {
    return real.size();
  }

  @Override
  public int waiters() {
    return real.waiters();
  }

  @Override
  public boolean isReady() {
    return real.isReady();
  }

  @Override
  public void close() {
    real.close();
  }
}
