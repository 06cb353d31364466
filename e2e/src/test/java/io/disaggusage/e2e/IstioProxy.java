package io.disaggusage.e2e;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.disaggusage.extproc.testkit.FreePorts;
import io.disaggusage.extproc.testkit.ShippedBootstrap;
import io.disaggusage.extproc.testkit.ShippedBootstrap.Topology;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * A real Envoy programmed by istiod over ADS, started by hand as pilot-agent would start it in a pod: the node
 * id and metadata istiod reads a proxy's kind, namespace, labels and address from. Without iptables capture
 * ({@code INTERCEPTION_MODE: NONE}) callers address its listeners directly. Its access log is Istio's
 * (the mesh's {@code accessLogFile: /dev/stdout}), read through {@link EnvoyProcess}.
 */
final class IstioProxy implements AutoCloseable {
  /** The name every shipped EnvoyFilter gives the service's ext_proc filter. */
  static final String EXT_PROC_FILTER = "envoy.filters.http.ext_proc.disagg_usage";

  /**
   * How pilot-agent has Envoy drain (its defaults: {@code drainDuration} 45 s, strategy immediate): a connection on
   * a listener istiod replaced is told to close with its next response, so the next request takes the new one.
   */
  static final List<String> PILOT_AGENT_DRAIN = List.of("--drain-time-s", "45", "--drain-strategy", "immediate");

  /** The release istiod programs: the pinned Istio build (1.31 development) pairs with Envoy 1.40. */
  static final String ENVOY = "1.40.0";

  /** Istio's proxy kinds: an application pod's sidecar, or a gateway. */
  enum Kind {
    SIDECAR("sidecar"), GATEWAY("router");

    final String nodeType;

    Kind(String nodeType) {
      this.nodeType = nodeType;
    }
  }

  private final String pod;
  private final EnvoyProcess envoy;

  private IstioProxy(String pod, EnvoyProcess envoy) {
    this.pod = pod;
    this.envoy = envoy;
  }

  /**
   * Starts Envoy as proxy {@code pod} of namespace {@code namespace} with {@code labels}, at pod address
   * {@code address} (which must not be a ServiceEntry endpoint: istiod would take the proxy for that workload
   * and drop its labels), connected to {@code istiod}; waits until its admin says LIVE, that is until istiod's
   * first clusters and listeners are in.
   */
  static IstioProxy start(Kind kind, String pod, String namespace, String address, Map<String, String> labels,
      IstiodProcess istiod) {
    Topology admin = new Topology(FreePorts.next(), 0, 0, List.of(), List.of(), List.of());
    ObjectNode bootstrap = bootstrap(kind, pod, namespace, address, labels, istiod.xdsPort(), admin.adminPort());
    return new IstioProxy(pod + "." + namespace, EnvoyProcess.start("istio-" + pod, ENVOY, bootstrap, admin, PILOT_AGENT_DRAIN));
  }

  /**
   * ADS to istiod over plaintext gRPC, CDS and LDS through it; no SDS cluster: the mesh runs without automatic
   * mTLS (no pilot-agent serves certificates), so nothing istiod sends names one.
   */
  private static final String BOOTSTRAP = """
      node:
        id: "%1$s~%2$s~%3$s.%4$s~%4$s.svc.cluster.local"
        cluster: "%3$s.%4$s"
        metadata: { NAMESPACE: "%4$s", INTERCEPTION_MODE: NONE, INSTANCE_IPS: "%2$s", LABELS: %5$s }
      admin:
        address: { socket_address: { address: 127.0.0.1, port_value: %6$d } }
      dynamic_resources:
        ads_config:
          api_type: GRPC
          transport_api_version: V3
          grpc_services: [{ envoy_grpc: { cluster_name: xds-grpc } }]
        cds_config: { ads: {}, resource_api_version: V3 }
        lds_config: { ads: {}, resource_api_version: V3 }
      static_resources:
        clusters:
        - name: xds-grpc
          type: STATIC
          connect_timeout: 1s
          typed_extension_protocol_options:
            envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
              "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
              explicit_http_config: { http2_protocol_options: {} }
          load_assignment:
            cluster_name: xds-grpc
            endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: %7$d } } } }] }]
      """;

  private static ObjectNode bootstrap(Kind kind, String pod, String namespace, String address, Map<String, String> labels,
      int xdsPort, int adminPort) {
    try {
      String text = BOOTSTRAP.formatted(kind.nodeType, address, pod, namespace,
          new com.fasterxml.jackson.databind.ObjectMapper().writeValueAsString(labels), adminPort, xdsPort);
      return (ObjectNode) ShippedBootstrap.YAML.readTree(text);
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }

  /** The id istiod's debug endpoints know this proxy by. */
  String id() {
    return pod;
  }

  EnvoyProcess envoy() {
    return envoy;
  }

  /**
   * Every {@code update_rejected} counter of Envoy's xDS subscriptions (CDS, LDS, each RDS and EDS) that is not
   * 0: what Envoy refused of istiod's configuration.
   */
  Map<String, Long> rejectedUpdates() {
    Map<String, Long> rejected = new LinkedHashMap<>();
    envoy.stats("").forEach((name, value) -> {
      if (name.endsWith(".update_rejected") && value != 0) {
        rejected.put(name, value);
      }
    });
    return rejected;
  }

  /**
   * The HTTP connection managers of the listeners istiod gave this proxy (active ones), by listener name: what
   * the EnvoyFilters under test patch.
   */
  Map<String, JsonNode> connectionManagers() {
    Map<String, JsonNode> managers = new TreeMap<>();
    JsonNode dump;
    try {
      dump = ShippedBootstrap.YAML.readTree(Http.body(envoy.adminUrl("/config_dump?resource=dynamic_listeners")));
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
    for (JsonNode config : dump.path("configs")) {
      JsonNode listener = config.path("active_state").path("listener");
      for (JsonNode chain : listener.path("filter_chains")) {
        for (JsonNode filter : chain.path("filters")) {
          if (filter.path("name").asText().equals("envoy.filters.network.http_connection_manager")) {
            managers.put(listener.path("name").asText(), filter.path("typed_config"));
          }
        }
      }
    }
    return managers;
  }

  /**
   * Per listener, the gRPC cluster of the service's ext_proc filter ({@code envoy.filters.http.ext_proc.disagg_usage}),
   * for the listeners that have it.
   */
  Map<String, String> extProcClusters() {
    Map<String, String> clusters = new TreeMap<>();
    connectionManagers().forEach((listener, manager) -> {
      for (JsonNode filter : manager.path("http_filters")) {
        if (filter.path("name").asText().equals(EXT_PROC_FILTER)) {
          clusters.put(listener, filter.at("/typed_config/grpc_service/envoy_grpc/cluster_name").asText());
        }
      }
    });
    return clusters;
  }

  /** The requests {@code cluster}'s hosts carried (gRPC streams for the service's cluster), as {@code /clusters} counts them. */
  long requests(String cluster) {
    return Http.body(envoy.adminUrl("/clusters")).lines()
        .filter(line -> line.startsWith(cluster + "::") && line.contains("::rq_total::"))
        .mapToLong(line -> Long.parseLong(line.substring(line.lastIndexOf("::") + 2))).sum();
  }

  /** Whether a host of {@code cluster} passed Envoy's active health check (a cluster without one counts healthy). */
  boolean healthy(String cluster) {
    return Http.body(envoy.adminUrl("/clusters")).lines()
        .anyMatch(line -> line.startsWith(cluster + "::") && line.endsWith("::health_flags::healthy"));
  }

  @Override
  public void close() {
    envoy.close();
  }
}
