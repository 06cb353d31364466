package io.disaggusage.deploy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;

/**
 * A bootstrap Envoy can validate, made from the xDS that {@code egctl x translate --to xds} prints (an
 * admin config dump per gateway): the proxy's bootstrap with its dynamic resources made static — every
 * listener with its route configuration inline instead of RDS, every EDS cluster with its endpoints
 * inline — and without the xDS connection to Envoy Gateway, which validate mode does not need. The
 * node's id and cluster, which Envoy Gateway passes on the proxy's command line, are set.
 */
final class XdsDumpBootstrap {
  private XdsDumpBootstrap() {}

  /** The bootstrap of the single gateway in {@code translated} (egctl's output, read as a tree). */
  static ObjectNode of(JsonNode translated) {
    JsonNode gateways = translated.path("xds");
    if (gateways.size() != 1) {
      throw new AssertionError("expected the xDS of one gateway, got " + gateways.size());
    }
    Map<String, JsonNode> dumps = new HashMap<>();
    for (JsonNode config : gateways.elements().next().path("configs")) {
      String type = config.path("@type").asText();
      dumps.put(type.substring(type.lastIndexOf('.') + 1), config);
    }
    ObjectNode bootstrap = dumps.get("BootstrapConfigDump").path("bootstrap").deepCopy();
    bootstrap.remove("dynamicResources");
    ObjectNode node = (ObjectNode) bootstrap.path("node");
    node.put("id", "validate").put("cluster", "gateway");
    ObjectNode resources = (ObjectNode) bootstrap.path("staticResources");
    ArrayNode clusters = resources.withArray("clusters");
    for (Iterator<JsonNode> it = clusters.elements(); it.hasNext(); ) {
      if (it.next().path("name").asText().equals("xds_cluster")) {
        it.remove(); // the connection to Envoy Gateway: its TLS files exist only in the proxy pod
      }
    }
    Map<String, JsonNode> endpoints = byName(dumps, "EndpointsConfigDump", "dynamicEndpointConfigs", "endpointConfig", "clusterName");
    Map<String, JsonNode> routes = byName(dumps, "RoutesConfigDump", "dynamicRouteConfigs", "routeConfig", "name");
    for (JsonNode entry : dumps.get("ClustersConfigDump").path("dynamicActiveClusters")) {
      clusters.add(entry.path("cluster").deepCopy());
    }
    for (JsonNode cluster : clusters) {
      ObjectNode c = (ObjectNode) cluster;
      c.remove("@type");
      if (c.path("type").asText().equals("EDS")) {
        String service = c.path("edsClusterConfig").path("serviceName").asText(c.path("name").asText());
        c.remove("edsClusterConfig");
        c.put("type", "STATIC");
        JsonNode assignment = endpoints.get(service);
        c.set("loadAssignment", assignment != null ? assignment
            : YamlDocuments.JSON.createObjectNode().put("clusterName", c.path("name").asText()));
      }
    }
    ArrayNode listeners = resources.withArray("listeners");
    for (JsonNode entry : dumps.get("ListenersConfigDump").path("dynamicListeners")) {
      ObjectNode listener = entry.path("activeState").path("listener").deepCopy();
      listener.remove("@type");
      inlineRoutes(listener, routes);
      listeners.add(listener);
    }
    return bootstrap;
  }

  private static Map<String, JsonNode> byName(Map<String, JsonNode> dumps, String dump, String list, String field,
      String key) {
    Map<String, JsonNode> out = new HashMap<>();
    JsonNode d = dumps.get(dump);
    if (d != null) {
      for (JsonNode entry : d.path(list)) {
        ObjectNode value = entry.path(field).deepCopy();
        value.remove("@type");
        out.put(value.path(key).asText(), value);
      }
    }
    return out;
  }

  /** Every {@code rds} below {@code node} replaced by the route configuration it names. */
  private static void inlineRoutes(JsonNode node, Map<String, JsonNode> routes) {
    if (node instanceof ObjectNode object) {
      JsonNode rds = object.get("rds");
      if (rds != null && rds.has("routeConfigName")) {
        JsonNode route = routes.get(rds.path("routeConfigName").asText());
        if (route == null) {
          throw new AssertionError("the translation names route configuration " + rds.path("routeConfigName")
              + " but does not carry it");
        }
        object.remove("rds");
        object.set("routeConfig", route);
      }
      object.elements().forEachRemaining(child -> inlineRoutes(child, routes));
    } else if (node instanceof ArrayNode array) {
      array.elements().forEachRemaining(child -> inlineRoutes(child, routes));
    }
  }
}
