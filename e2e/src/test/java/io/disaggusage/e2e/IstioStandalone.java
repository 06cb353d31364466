package io.disaggusage.e2e;

import com.fasterxml.jackson.core.JsonProcessingException;
import io.disaggusage.extproc.testkit.ShippedBootstrap;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * What istiod without Kubernetes needs beside the shipped EnvoyFilters, and nothing more: each object stands in
 * for what a cluster would give istiod, or keeps the live run on loopback. Names are those istio/README.md
 * assumes (namespace {@code llm}, Services {@code context-workers} and {@code generation-workers} on 8000,
 * {@code disagg-usage-extproc} on 9002 named {@code grpc}).
 */
final class IstioStandalone {
  static final String NAMESPACE = "llm";
  static final String CONTEXT_HOST = "context-workers.llm.svc.cluster.local";
  static final String GENERATION_HOST = "generation-workers.llm.svc.cluster.local";
  static final String SERVICE_HOST = "disagg-usage-extproc.llm.svc.cluster.local";
  static final int WORKER_PORT = 8000;
  /** The port istio/sidecar-outbound.yaml's STATIC cluster points at, and the central Service's gRPC port. */
  static final int GRPC_PORT = 9002;
  /** Istio's outbound cluster names, as istio/README.md tells an operator to list them in classification. */
  static final String CONTEXT_CLUSTER = "outbound|8000||" + CONTEXT_HOST;
  static final String GENERATION_CLUSTER = "outbound|8000||" + GENERATION_HOST;
  /** The orchestrator pods' labels the sidecar EnvoyFilters select. */
  static final Map<String, String> ORCHESTRATOR_LABELS = Map.of("app.kubernetes.io/name", "disagg-router");
  /**
   * The label Istio puts on a Gateway API gateway's pods; istiod matches an EnvoyFilter's {@code targetRefs}
   * Gateway by it.
   */
  static final Map<String, String> GATEWAY_LABELS = Map.of("gateway.networking.k8s.io/gateway-name", "llm-gateway");
  /**
   * Where the orchestrator's sidecar binds its outbound listeners: without iptables capture they would take the
   * ports the real services use (9002 is the service's own).
   */
  static final String SIDECAR_BIND = "127.0.0.3";

  private IstioStandalone() {}

  /**
   * The mesh configuration: Istio's access log to stdout in the shipped bootstrap's format, and no automatic
   * mTLS, because no pilot-agent serves the proxies certificates over SDS (with it, every outbound cluster waits
   * for a certificate that never comes). The format prints {@code %UPSTREAM_CLUSTER_RAW%}: Istio gives each
   * cluster an {@code alt_stat_name} ({@code outbound|8000||host;}), which {@code %UPSTREAM_CLUSTER%} prints
   * instead of the name.
   */
  static String meshConfig() {
    String format;
    try {
      format = ShippedBootstrap.YAML.readTree(Files.readString(Tools.shippedBootstrap())).findValue("inline_string").asText();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    if (!format.contains("cluster=%UPSTREAM_CLUSTER% ")) {
      throw new AssertionError("the shipped access log format no longer prints cluster=%UPSTREAM_CLUSTER%: " + format);
    }
    Map<String, Object> mesh = new LinkedHashMap<>();
    mesh.put("enableAutoMtls", false);
    mesh.put("accessLogFile", "/dev/stdout");
    mesh.put("accessLogEncoding", "TEXT");
    mesh.put("accessLogFormat", format.replace("%UPSTREAM_CLUSTER%", "%UPSTREAM_CLUSTER_RAW%"));
    return yaml(mesh);
  }

  /**
   * ServiceEntries for the three Kubernetes Services (a registry-less istiod has no Services): the same hosts,
   * ports, port names and protocols, with loopback endpoints on the ports the test's workers and service listen
   * on.
   */
  static String services(int contextWorker, int generationWorker) {
    return String.join("---\n",
        serviceEntry("context-workers", CONTEXT_HOST, WORKER_PORT, "http", "HTTP", contextWorker),
        serviceEntry("generation-workers", GENERATION_HOST, WORKER_PORT, "http", "HTTP", generationWorker),
        serviceEntry("disagg-usage-extproc", SERVICE_HOST, GRPC_PORT, "grpc", "GRPC", GRPC_PORT));
  }

  private static String serviceEntry(String name, String host, int port, String portName, String protocol, int target) {
    return """
        apiVersion: networking.istio.io/v1
        kind: ServiceEntry
        metadata: { name: %s, namespace: llm }
        spec:
          hosts: [%s]
          location: MESH_INTERNAL
          resolution: STATIC
          ports: [{ number: %d, name: %s, protocol: %s, targetPort: %d }]
          endpoints: [{ address: 127.0.0.1 }]
        """.formatted(name, host, port, portName, protocol, target);
  }

  /** The orchestrator pods' Sidecar: its outbound listeners on {@link #SIDECAR_BIND} (no iptables here). */
  static String sidecar() {
    return """
        apiVersion: networking.istio.io/v1
        kind: Sidecar
        metadata: { name: disagg-router, namespace: llm }
        spec:
          workloadSelector: { labels: { app.kubernetes.io/name: disagg-router } }
          egress: [{ bind: %s, hosts: ["llm/*"] }]
        """.formatted(SIDECAR_BIND);
  }

  /**
   * The gateway path: istiod reads no Gateway API objects without Kubernetes, so a classic Gateway on the gateway
   * proxy's labels (bound to loopback, on {@code port}) and one VirtualService per worker Service stand in for
   * the Gateway {@code llm-gateway} and its HTTPRoutes to the Services' port 8000.
   */
  static String gateway(int port) {
    StringBuilder yaml = new StringBuilder("""
        apiVersion: networking.istio.io/v1
        kind: Gateway
        metadata: { name: llm-gateway, namespace: llm }
        spec:
          selector: { gateway.networking.k8s.io/gateway-name: llm-gateway }
          servers: [{ port: { number: %d, name: http, protocol: HTTP }, bind: 127.0.0.1, hosts: ["llm/*"] }]
        """.formatted(port));
    for (String host : List.of(CONTEXT_HOST, GENERATION_HOST)) {
      yaml.append("---\n").append("""
          apiVersion: networking.istio.io/v1
          kind: VirtualService
          metadata: { name: %s, namespace: llm }
          spec:
            hosts: [%s]
            gateways: [llm-gateway]
            http: [{ route: [{ destination: { host: %s, port: { number: %d } } }] }]
          """.formatted(host.substring(0, host.indexOf('.')), host, host, WORKER_PORT));
    }
    return yaml.toString();
  }

  /** A shipped file of istio/, as the operator applies it. */
  static String shipped(String file) {
    try {
      return Files.readString(Tools.root().resolve("istio").resolve(file));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /**
   * An EnvoyFilter with its HTTP_FILTER patches deleted and its other patches (sidecar-outbound.yaml's CLUSTER)
   * kept: the first step of leaving sidecar mode while requests are in flight (istio/README.md).
   */
  static String withoutHttpFilters(String envoyFilter) {
    try {
      com.fasterxml.jackson.databind.node.ObjectNode filter =
          (com.fasterxml.jackson.databind.node.ObjectNode) ShippedBootstrap.YAML.readTree(envoyFilter);
      com.fasterxml.jackson.databind.node.ArrayNode patches = (com.fasterxml.jackson.databind.node.ArrayNode) filter.at("/spec/configPatches");
      int before = patches.size();
      for (int i = patches.size() - 1; i >= 0; i--) {
        if (patches.get(i).path("applyTo").asText().equals("HTTP_FILTER")) {
          patches.remove(i);
        }
      }
      if (patches.size() == before || patches.isEmpty()) {
        throw new AssertionError("expected an HTTP_FILTER patch and another one in " + filter.at("/metadata/name"));
      }
      return yaml(filter);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static String yaml(Object value) {
    try {
      return ShippedBootstrap.YAML.writeValueAsString(value);
    } catch (JsonProcessingException e) {
      throw new UncheckedIOException(e);
    }
  }
}
