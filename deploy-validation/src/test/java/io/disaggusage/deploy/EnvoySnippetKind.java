package io.disaggusage.deploy;

import com.fasterxml.jackson.databind.JsonNode;
import com.google.protobuf.Descriptors.Descriptor;
import io.envoyproxy.envoy.config.bootstrap.v3.Bootstrap;
import io.envoyproxy.envoy.config.cluster.v3.Cluster;
import io.envoyproxy.envoy.config.route.v3.RouteConfiguration;
import io.envoyproxy.envoy.config.route.v3.VirtualHost;
import io.envoyproxy.envoy.extensions.filters.network.http_connection_manager.v3.HttpFilter;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.Set;

/**
 * The kinds of Envoy configuration the documentation shows, how each is recognised by its shape (the
 * fields only that message has), and where each goes in a bootstrap.
 */
enum EnvoySnippetKind {
  BOOTSTRAP(Bootstrap.getDescriptor(), Set.of("static_resources", "dynamic_resources", "layered_runtime")),
  ROUTE_CONFIGURATION(RouteConfiguration.getDescriptor(), Set.of("virtual_hosts")),
  VIRTUAL_HOST(VirtualHost.getDescriptor(), Set.of("domains")),
  /** An HTTP filter: a name and a typed_config of an HTTP filter extension. */
  HTTP_FILTER(HttpFilter.getDescriptor(), Set.of()),
  CLUSTER(
      Cluster.getDescriptor(),
      Set.of("type", "load_assignment", "connect_timeout", "transport_socket", "lb_policy", "health_checks",
          "outlier_detection", "circuit_breakers", "typed_extension_protocol_options"));

  /** Envoy's message type for the kind. */
  final Descriptor type;
  /** Top-level fields of which any one marks the kind (checked in declaration order). */
  private final Set<String> markingFields;

  EnvoySnippetKind(Descriptor type, Set<String> markingFields) {
    this.type = type;
    this.markingFields = markingFields;
  }

  /** The kind a {@code # envoy: <proto type>} first line names. */
  static Optional<EnvoySnippetKind> named(String protoType) {
    return Arrays.stream(values()).filter(k -> k.type.getFullName().equals(protoType)).findFirst();
  }

  /** The kind of one YAML mapping, judged by its top-level fields. */
  static Optional<EnvoySnippetKind> ofShape(JsonNode item) {
    if (!item.isObject()) {
      return Optional.empty();
    }
    if (item.has("name") && item.path("typed_config").toString().contains(".filters.http.")) {
      return Optional.of(HTTP_FILTER);
    }
    return Arrays.stream(values())
        .filter(k -> k.markingFields.stream().anyMatch(item::has))
        .filter(k -> k != CLUSTER || item.has("name"))
        .findFirst();
  }

  /** A bootstrap holding the items (all of this kind) where they belong. */
  JsonNode bootstrap(List<JsonNode> items) {
    if (this == BOOTSTRAP) {
      if (items.size() != 1) {
        throw new IllegalArgumentException("one bootstrap per snippet, found " + items.size());
      }
      return items.get(0);
    }
    BootstrapAssembly assembly = new BootstrapAssembly();
    for (JsonNode item : items) {
      switch (this) {
        case ROUTE_CONFIGURATION -> assembly.routeConfiguration(item);
        case VIRTUAL_HOST -> assembly.virtualHost(item);
        case HTTP_FILTER -> assembly.httpFilterBeforeRouter(item);
        case CLUSTER -> assembly.cluster(item);
        default -> throw new IllegalStateException(name());
      }
    }
    return assembly.build();
  }
}
