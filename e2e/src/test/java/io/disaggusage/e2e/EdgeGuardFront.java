package io.disaggusage.e2e;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.disaggusage.extproc.testkit.FreePorts;
import io.disaggusage.extproc.testkit.RealEnvoy;
import io.disaggusage.extproc.testkit.ShippedBootstrap;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;

/**
 * The client-facing side as shipped: the jar run as the edge guard ({@code edge_guard.enabled=true}) and an
 * Envoy on {@code deploy/envoy/edge-guard/envoy.yaml} (its ports moved to the test's) whose orchestrator
 * cluster is {@code upstream} — a recording stand-in, or a real router. Clients call {@link #url}.
 */
final class EdgeGuardFront implements AutoCloseable {
  final ServiceProcess guard;
  final RealEnvoy envoy;
  final int listener = FreePorts.next();

  private EdgeGuardFront(String name, String release, int upstream) {
    guard = ServiceProcess.started(name + "-" + release, "--set", "edge_guard.enabled=true");
    try {
      int admin = FreePorts.next();
      ObjectNode bootstrap = bootstrap(admin, listener, upstream, guard.grpcPort());
      Path config = Tools.logs().resolve(name + "-envoy-" + release + ".yaml");
      Files.writeString(config, ShippedBootstrap.yaml(bootstrap));
      // Its access log (details=%RESPONSE_CODE_DETAILS%) and the ext_proc filter's own account, for a failure.
      envoy = RealEnvoy.start("Envoy " + release + " " + name, Tools.envoy(release), config, admin,
          Tools.logs().resolve(name + "-envoy-" + release + ".log"),
          Tools.logs().resolve(name + "-envoy-" + release + ".access.log"),
          List.of("--file-flush-interval-msec", "20", "-l", "info", "--component-log-level", "ext_proc:debug"));
    } catch (IOException e) {
      guard.close();
      throw new UncheckedIOException(e);
    } catch (RuntimeException | AssertionError e) {
      guard.close();
      throw e;
    }
    try {
      Processes.await("the edge guard healthy in Envoy " + release, Duration.ofSeconds(20), () ->
          Http.body(envoy.adminUrl("/clusters")).lines()
              .anyMatch(l -> l.startsWith("disagg_usage_edge_guard::") && l.endsWith("::health_flags::healthy")));
    } catch (RuntimeException | AssertionError e) {
      close();
      throw e;
    }
  }

  /** The guard and its Envoy in front of {@code upstream} (a port on loopback). */
  static EdgeGuardFront start(String name, String release, int upstream) {
    return new EdgeGuardFront(name, release, upstream);
  }

  /** A path on the client-facing listener. */
  String url(String path) {
    return "http://127.0.0.1:" + listener + path;
  }

  /** The shipped edge bootstrap with the test's ports. */
  static ObjectNode bootstrap(int admin, int listener, int upstream, int guard) {
    ObjectNode root;
    try {
      root = (ObjectNode) ShippedBootstrap.YAML.readTree(Tools.root().resolve("deploy/envoy/edge-guard/envoy.yaml").toFile());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    ShippedBootstrap.socketAddress(root.path("admin").path("address")).put("port_value", admin);
    ObjectNode resources = (ObjectNode) root.path("static_resources");
    ObjectNode socket =
        ShippedBootstrap.socketAddress(ShippedBootstrap.named(resources, "listeners", "client_ingress").path("address"));
    socket.put("address", ShippedBootstrap.LOOPBACK);
    socket.put("port_value", listener);
    ShippedBootstrap.endpoints(
        ShippedBootstrap.named(resources, "clusters", "orchestrator"), ShippedBootstrap.LOOPBACK, List.of(upstream));
    ShippedBootstrap.named(resources, "clusters", "orchestrator").put("type", "STATIC");
    ShippedBootstrap.endpoints(
        ShippedBootstrap.named(resources, "clusters", "disagg_usage_edge_guard"), ShippedBootstrap.LOOPBACK, List.of(guard));
    return root;
  }

  @Override
  public void close() {
    envoy.close();
    guard.close();
  }
}
