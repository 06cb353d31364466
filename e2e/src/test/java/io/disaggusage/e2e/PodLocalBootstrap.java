package io.disaggusage.e2e;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.disaggusage.extproc.testkit.FreePorts;
import io.disaggusage.extproc.testkit.ShippedBootstrap;
import io.disaggusage.extproc.testkit.ShippedBootstrap.Topology;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.List;

/**
 * The shipped pod-local bootstraps ({@code deploy/envoy/pod-local/prefill.yaml} and {@code decode.yaml},
 * the Envoy beside each worker) as a test runs them: one Envoy per "pod", each pod a loopback address
 * such as 127.0.0.2 or 127.0.0.3 (Linux routes all of 127/8 to lo). Only addresses and ports change —
 * the admin port, the listener's bind address and port, the engine cluster's endpoint (the worker at
 * the pod's address) and the processor cluster's endpoints; filter settings, timeouts, health checks,
 * cluster names and the access log are the shipped file's. A shape the rewrite does not expect fails
 * loudly, so a test cannot silently run something other than the shipped file.
 */
final class PodLocalBootstrap {
  /** Which worker the Envoy sits beside: its shipped file and the names in it. */
  enum Role {
    PREFILL("prefill.yaml", "prefill_inbound", "prefill_local"),
    DECODE("decode.yaml", "decode_inbound", "decode_local");

    final String file;
    final String listener;
    /** The engine cluster; the service's classification names it (context resp. generation). */
    final String cluster;

    Role(String file, String listener, String cluster) {
      this.file = file;
      this.listener = listener;
      this.cluster = cluster;
    }

    Path shipped() {
      return Tools.root().resolve("deploy/envoy/pod-local").resolve(file);
    }
  }

  /**
   * One pod as a test lays it out.
   *
   * @param role the worker beside which the Envoy runs
   * @param address the pod address (a 127/8 address) Envoy's listener binds, as it binds the pod IP
   * @param listenerPort the listener's port (the pod's serving port)
   * @param engine the worker's port on {@code address}, standing in for the engine on the pod's loopback
   * @param adminPort Envoy's admin port (on 127.0.0.1, as shipped)
   * @param services the processor replicas' gRPC ports on 127.0.0.1
   */
  record Pod(Role role, String address, int listenerPort, int engine, int adminPort, List<Integer> services) {
    /** A pod with fresh listener and admin ports. */
    static Pod of(Role role, String address, int engine, List<Integer> services) {
      return new Pod(role, address, FreePorts.next(), engine, FreePorts.next(), List.copyOf(services));
    }

    /** The URL a router or pd-sidecar uses for this pod: its address and serving port. */
    String url(String path) {
      return "http://" + address + ":" + listenerPort + path;
    }

    /**
     * What {@link EnvoyProcess} needs of this pod: its admin port (health, stats) and the processor
     * endpoints. Its listener URLs name 127.0.0.1; use {@link #url} for the pod's.
     */
    Topology envoyTopology() {
      return new Topology(adminPort, listenerPort, listenerPort, List.of(engine), List.of(engine), services);
    }

    /** Starts real Envoy {@code release} on this pod's rewritten bootstrap; waits until it is LIVE. */
    EnvoyProcess start(String name, String release) {
      return EnvoyProcess.start(name, release, rewrite(this), envoyTopology());
    }
  }

  private PodLocalBootstrap() {}

  /** The service's arguments for pod-local Envoys: classification by their cluster names, then {@code extra}. */
  static String[] serviceArgs(String... extra) {
    List<String> args = new java.util.ArrayList<>(List.of(
        "--set", "classification.context_clusters=" + Role.PREFILL.cluster,
        "--set", "classification.generation_clusters=" + Role.DECODE.cluster));
    args.addAll(List.of(extra));
    return args.toArray(String[]::new);
  }

  /** The shipped bootstrap of {@code pod.role()} with {@code pod}'s addresses and ports. */
  static ObjectNode rewrite(Pod pod) {
    ObjectNode root;
    try {
      root = (ObjectNode) ShippedBootstrap.YAML.readTree(pod.role().shipped().toFile());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    ShippedBootstrap.socketAddress(root.path("admin").path("address")).put("port_value", pod.adminPort());
    ObjectNode resources = (ObjectNode) root.path("static_resources");
    if (resources.path("listeners").size() != 1) {
      throw new AssertionError(pod.role().file + " should have exactly one listener");
    }
    ObjectNode listener = ShippedBootstrap.socketAddress(
        ShippedBootstrap.named(resources, "listeners", pod.role().listener).path("address"));
    listener.put("address", pod.address());
    listener.put("port_value", pod.listenerPort());
    ShippedBootstrap.endpoints(
        ShippedBootstrap.named(resources, "clusters", pod.role().cluster), pod.address(), List.of(pod.engine()));
    ShippedBootstrap.endpoints(
        ShippedBootstrap.named(resources, "clusters", "disagg_usage_extproc"), ShippedBootstrap.LOOPBACK, pod.services());
    return root;
  }
}
