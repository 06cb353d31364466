package io.disaggusage.deploy;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.UncheckedIOException;
import java.util.Set;
import java.util.TreeSet;

/**
 * A minimal Envoy bootstrap — one listener whose HTTP connection manager routes everything to a
 * cluster, with the router as its only HTTP filter — into which a piece of configuration is put where
 * its owner would put it: an HTTP filter next to the router (as istiod inserts an HTTP_FILTER patch),
 * fields merged into the HTTP connection manager (a NETWORK_FILTER MERGE on it),
 * a cluster into the clusters, a virtual host or route configuration into the connection manager.
 * {@link #build()} adds a stand-in cluster for every cluster the result names but does not define (an
 * Istio outbound cluster, the processor's cluster next to a filter snippet, a route's upstream), so
 * Envoy judges the piece and not its missing neighbours.
 */
final class BootstrapAssembly {
  static final String ROUTER = "envoy.filters.http.router";

  private static final String SKELETON =
      """
      static_resources:
        listeners:
        - name: assembled
          address: { socket_address: { address: 127.0.0.1, port_value: 10000 } }
          filter_chains:
          - filters:
            - name: envoy.filters.network.http_connection_manager
              typed_config:
                "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
                stat_prefix: assembled
                route_config:
                  name: assembled
                  virtual_hosts:
                  - name: workers
                    domains: ["*"]
                    routes:
                    - match: { prefix: "/" }
                      route: { cluster: workers }
                http_filters:
                - name: envoy.filters.http.router
                  typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router }
        clusters: []
      """;

  /** A loopback cluster; gRPC stand-ins also get HTTP/2, as every gRPC cluster must. */
  private static final String STAND_IN =
      """
      type: STATIC
      load_assignment:
        endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: 8000 } } } }] }]
      """;

  private static final String HTTP2 =
      """
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: { http2_protocol_options: {} }
      """;

  private final ObjectNode bootstrap = (ObjectNode) yaml(SKELETON);

  private ObjectNode connectionManager() {
    return (ObjectNode) bootstrap.at("/static_resources/listeners/0/filter_chains/0/filters/0/typed_config");
  }

  private ArrayNode httpFilters() {
    return (ArrayNode) connectionManager().get("http_filters");
  }

  private ArrayNode clusters() {
    return (ArrayNode) bootstrap.at("/static_resources/clusters");
  }

  /**
   * Puts an HTTP filter in the chain the way istiod applies an HTTP_FILTER patch's operation:
   * INSERT_BEFORE / INSERT_AFTER the filter named {@code relativeTo}, INSERT_FIRST, or ADD (last).
   */
  BootstrapAssembly httpFilter(JsonNode filter, String operation, String relativeTo) {
    ArrayNode chain = httpFilters();
    switch (operation) {
      case "INSERT_FIRST" -> chain.insert(0, filter.deepCopy());
      case "ADD" -> chain.add(filter.deepCopy());
      case "INSERT_BEFORE", "INSERT_AFTER" -> {
        int at = indexOf(chain, relativeTo);
        chain.insert(operation.equals("INSERT_BEFORE") ? at : at + 1, filter.deepCopy());
      }
      default -> throw new IllegalArgumentException("no HTTP filter operation " + operation);
    }
    return this;
  }

  BootstrapAssembly httpFilterBeforeRouter(JsonNode filter) {
    return httpFilter(filter, "INSERT_BEFORE", ROUTER);
  }

  BootstrapAssembly cluster(JsonNode cluster) {
    clusters().add(cluster.deepCopy());
    return this;
  }

  /**
   * Merges {@code filter}'s {@code typed_config} into the HTTP connection manager, the way istiod applies a
   * NETWORK_FILTER MERGE to that filter: same type, field by field (nested messages merged, lists appended).
   */
  BootstrapAssembly mergeIntoConnectionManager(JsonNode filter) {
    JsonNode config = filter.path("typed_config");
    String type = connectionManager().path("@type").asText();
    if (!config.path("@type").asText().equals(type)) {
      throw new IllegalArgumentException("a MERGE into the connection manager must be typed " + type + ", was " + config.path("@type"));
    }
    merge(connectionManager(), (ObjectNode) config);
    return this;
  }

  private static void merge(ObjectNode into, ObjectNode from) {
    from.fields().forEachRemaining(field -> {
      JsonNode existing = into.get(field.getKey());
      if (existing instanceof ObjectNode target && field.getValue() instanceof ObjectNode source) {
        merge(target, source);
      } else if (existing instanceof ArrayNode target && field.getValue() instanceof ArrayNode source) {
        target.addAll(source.deepCopy());
      } else {
        into.set(field.getKey(), field.getValue().deepCopy());
      }
    });
  }

  /** The connection manager's only virtual host. */
  BootstrapAssembly virtualHost(JsonNode virtualHost) {
    ((ObjectNode) connectionManager().get("route_config")).putArray("virtual_hosts").add(virtualHost.deepCopy());
    return this;
  }

  BootstrapAssembly routeConfiguration(JsonNode routeConfiguration) {
    connectionManager().set("route_config", routeConfiguration.deepCopy());
    return this;
  }

  /** The bootstrap, with a stand-in for every cluster it names but does not define. */
  JsonNode build() {
    ObjectNode result = bootstrap.deepCopy();
    ArrayNode clusters = (ArrayNode) result.at("/static_resources/clusters");
    Set<String> defined = new TreeSet<>();
    clusters.forEach(c -> defined.add(c.path("name").asText()));
    Set<String> routeTargets = new TreeSet<>();
    Set<String> grpcTargets = new TreeSet<>();
    collectReferences(result, routeTargets, grpcTargets);
    for (String name : grpcTargets) {
      if (defined.add(name)) {
        clusters.add(standIn(name).set("typed_extension_protocol_options", yaml(HTTP2)));
      }
    }
    for (String name : routeTargets) {
      if (defined.add(name)) {
        clusters.add(standIn(name));
      }
    }
    return result;
  }

  private static ObjectNode standIn(String name) {
    ObjectNode cluster = YamlDocuments.JSON.createObjectNode().put("name", name);
    cluster.setAll((ObjectNode) yaml(STAND_IN));
    ((ObjectNode) cluster.get("load_assignment")).put("cluster_name", name);
    return cluster;
  }

  /** Clusters named by routes ({@code route.cluster}) and by gRPC services ({@code envoy_grpc.cluster_name}). */
  private static void collectReferences(JsonNode node, Set<String> routeTargets, Set<String> grpcTargets) {
    if (node.isObject()) {
      if (node.path("route").path("cluster").isTextual()) {
        routeTargets.add(node.path("route").path("cluster").asText());
      }
      if (node.path("envoy_grpc").path("cluster_name").isTextual()) {
        grpcTargets.add(node.path("envoy_grpc").path("cluster_name").asText());
      }
    }
    node.forEach(child -> collectReferences(child, routeTargets, grpcTargets));
  }

  private static int indexOf(ArrayNode chain, String name) {
    for (int i = 0; i < chain.size(); i++) {
      if (chain.get(i).path("name").asText().equals(name)) {
        return i;
      }
    }
    throw new IllegalArgumentException("no HTTP filter " + name + " in the chain");
  }

  private static JsonNode yaml(String text) {
    try {
      return YamlDocuments.YAML.readTree(text);
    } catch (JsonProcessingException e) {
      throw new UncheckedIOException(e);
    }
  }
}
