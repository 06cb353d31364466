package io.disaggusage.e2e;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A network namespace of a test's own, joined to the test's namespace by a veth pair with one address
 * at each end, so that a program which binds 0.0.0.0 on fixed ports (Envoy Gateway: xDS 18000, its
 * admin and metrics ports, the Gateway's listeners) runs beside others, and its proxy reaches the
 * workers and the service listening in the test's namespace at {@link #hostAddress()}. Created with
 * {@code ip netns} (iproute2; it needs root, as CI runs) and removed again on close, the veth pair
 * with it.
 */
final class NetworkNamespace implements AutoCloseable {
  private final String name;
  private final String hostAddress;
  private final String namespaceAddress;

  private NetworkNamespace(String name, String hostAddress, String namespaceAddress) {
    this.name = name;
    this.hostAddress = hostAddress;
    this.namespaceAddress = namespaceAddress;
  }

  /**
   * A namespace named {@code prefix} and this JVM's pid (interface names allow 15 characters: keep the
   * prefix short), on a /30 of 10.233.0.0/16 chosen by the pid.
   */
  static NetworkNamespace create(String prefix) {
    long pid = ProcessHandle.current().pid();
    String name = prefix + pid;
    int slot = (int) (pid % 16384);
    String base = "10.233." + (slot / 64) + ".";
    int first = (slot % 64) * 4;
    NetworkNamespace ns = new NetworkNamespace(name, base + (first + 1), base + (first + 2));
    ns.remove(); // a namespace a killed run of the same pid left behind
    try {
      ip("netns", "add", name);
      ip("link", "add", ns.hostLink(), "type", "veth", "peer", "name", ns.namespaceLink(), "netns", name);
      ip("addr", "add", ns.hostAddress + "/30", "dev", ns.hostLink());
      ip("link", "set", ns.hostLink(), "up");
      ns.run(List.of("ip", "addr", "add", ns.namespaceAddress + "/30", "dev", ns.namespaceLink()));
      ns.run(List.of("ip", "link", "set", ns.namespaceLink(), "up"));
      ns.run(List.of("ip", "link", "set", "lo", "up")); // the proxy reaches its controller's xDS on loopback
      return ns;
    } catch (RuntimeException | AssertionError e) {
      ns.close();
      throw e;
    }
  }

  /** The test's end of the veth pair: where the proxy in the namespace reaches workers and services. */
  String hostAddress() {
    return hostAddress;
  }

  /** The namespace's end: where the test reaches what listens in the namespace. */
  String namespaceAddress() {
    return namespaceAddress;
  }

  /** {@code command} run inside the namespace ({@code ip netns exec}, which execs it: the pid is its own). */
  List<String> inside(List<String> command) {
    List<String> wrapped = new ArrayList<>(List.of("ip", "netns", "exec", name));
    wrapped.addAll(command);
    return wrapped;
  }

  /** Runs {@code command} inside the namespace to its end and returns its stdout; fails on a non-zero exit. */
  String run(List<String> command) {
    return exec(inside(command));
  }

  private String hostLink() {
    return name + "h";
  }

  private String namespaceLink() {
    return name + "n";
  }

  private static void ip(String... args) {
    List<String> command = new ArrayList<>(List.of("ip"));
    command.addAll(List.of(args));
    exec(command);
  }

  private static String exec(List<String> command) {
    try {
      Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
      p.getOutputStream().close();
      String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      if (!p.waitFor(10, TimeUnit.SECONDS) || p.exitValue() != 0) {
        p.destroyForcibly();
        throw new AssertionError(String.join(" ", command) + " failed (network namespaces need root and iproute2): " + out);
      }
      return out;
    } catch (IOException e) {
      throw new UncheckedIOException("cannot run " + command.get(0) + " (apt-get install iproute2)", e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  /** Deletes the namespace (its end of the veth pair goes with it, and so the pair) if it exists. */
  private void remove() {
    if (exec(List.of("ip", "netns", "list")).lines().anyMatch(line -> line.split(" ")[0].equals(name))) {
      exec(List.of("ip", "netns", "delete", name));
    }
    if (!hostLinkExists()) {
      return;
    }
    try {
      exec(List.of("ip", "link", "delete", hostLink()));
    } catch (RuntimeException | AssertionError e) {
      // Deleting the namespace destroys its end of the veth pair, and the kernel then removes the host end
      // on its own, a moment later: it may vanish between the check above and the delete.
      if (hostLinkExists()) {
        throw e;
      }
    }
  }

  private boolean hostLinkExists() {
    return exec(List.of("ip", "-o", "link", "show")).contains(" " + hostLink() + "@");
  }

  @Override
  public void close() {
    remove();
  }

  @Override
  public String toString() {
    return name;
  }
}
