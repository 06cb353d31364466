package io.disaggusage.extproc.runtime;

import io.grpc.ManagedChannel;
import java.util.Collection;
import java.util.concurrent.TimeUnit;

/** What the runtime tests open, closed after each: the client channels first, then the server they talk to. */
final class RuntimeTeardown {
  private RuntimeTeardown() {}

  /** Closes {@code channels} and then {@code runtime} (null when the test never started one). */
  static void close(Collection<ManagedChannel> channels, ServerRuntime runtime) throws InterruptedException {
    for (ManagedChannel channel : channels) {
      channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
    }
    if (runtime != null) {
      runtime.close();
    }
  }
}
