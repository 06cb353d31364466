package io.disaggusage.extproc.tools;

import io.grpc.ConnectivityState;
import io.grpc.ManagedChannel;
import java.time.Duration;

/** Waiting for a gRPC channel to connect, before an exchange's message timer would count the connect. */
public final class Channels {
  private Channels() {}

  /**
   * Asks the channel to connect and waits until it is ready, its connection attempt failed, or {@code
   * timeout} has passed.
   *
   * @return whether it is ready
   */
  public static boolean awaitReady(ManagedChannel channel, Duration timeout) {
    long deadline = System.nanoTime() + timeout.toNanos();
    ConnectivityState state = channel.getState(true);
    while (state != ConnectivityState.READY) {
      if (state == ConnectivityState.TRANSIENT_FAILURE || System.nanoTime() > deadline) {
        return false;
      }
      try {
        Thread.sleep(5);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return false;
      }
      state = channel.getState(true);
    }
    return true;
  }
}
