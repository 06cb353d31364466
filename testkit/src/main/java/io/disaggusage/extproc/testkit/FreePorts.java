package io.disaggusage.extproc.testkit;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Ports nobody listens on, for processes that must be told their port before they start (the e2e suite's
 * and the benchmarks' Envoys and services).
 *
 * <p>They come from below Linux's ephemeral range (32768–60999 by default): a port the kernel handed
 * out as "free" from that range can become the source port of some outgoing connection before the
 * process told to listen on it binds it (an Envoy once failed with {@code cannot bind
 * '127.0.0.2:33399': Address already in use}). Each JVM walks the range from its own starting point, and
 * a port counts as free only when it can be bound on every address, so one listening on any loopback
 * address (pod-local Envoys use 127.0.0.2) is skipped.
 */
public final class FreePorts {
  private static final int LOW = 20_000;
  private static final int HIGH = 32_000;
  private static final AtomicInteger NEXT =
      new AtomicInteger((int) Math.floorMod(ProcessHandle.current().pid() * 7_919L, (long) (HIGH - LOW)));

  private FreePorts() {}

  public static int next() {
    for (int tries = 0; tries < HIGH - LOW; tries++) {
      int port = LOW + Math.floorMod(NEXT.getAndIncrement(), HIGH - LOW);
      if (free(port)) {
        return port;
      }
    }
    throw new IllegalStateException("no free port in " + LOW + "-" + HIGH);
  }

  /** Whether something accepts a TCP connection on 127.0.0.1:{@code port} within half a second. */
  public static boolean accepts(int port) {
    try (java.net.Socket s = new java.net.Socket()) {
      s.connect(new InetSocketAddress("127.0.0.1", port), 500);
      return true;
    } catch (IOException e) {
      return false;
    }
  }

  private static boolean free(int port) {
    try (ServerSocket socket = new ServerSocket()) {
      socket.setReuseAddress(true); // a port whose last connection is in TIME_WAIT is fine for a listener
      socket.bind(new InetSocketAddress(port), 1);
      return true;
    } catch (IOException e) {
      return false;
    }
  }
}
