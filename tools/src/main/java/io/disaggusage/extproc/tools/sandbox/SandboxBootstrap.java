package io.disaggusage.extproc.tools.sandbox;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import com.fasterxml.jackson.dataformat.yaml.YAMLGenerator;
import com.google.protobuf.util.Durations;
import io.disaggusage.extproc.driver.FilterConfigs;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Optional;
import java.util.function.Consumer;

/**
 * The sandbox's Envoy bootstrap, derived from the shipped {@code deploy/envoy/envoy.yaml} (packaged in
 * the jar) so that what the user sees working are the shipped filter settings, timeouts and access log.
 * Only what ties the file to a deployment changes: listener and cluster names, addresses and ports
 * (everything on loopback), each route's cluster, the workers' endpoints and the service's port. Each
 * shipped listener (one per leg) is copied once per family and passage; the copies around the service
 * lose the ext_proc filter and nothing else.
 */
final class SandboxBootstrap {
  /** Where the build puts the shipped bootstrap in the jar. */
  static final String SHIPPED_RESOURCE = "/deploy/envoy/envoy.yaml";

  /** The service's cluster in the shipped bootstrap. */
  static final String SERVICE_CLUSTER = "disagg_usage_extproc";

  private static final String LOOPBACK = "127.0.0.1";
  private static final String HTTP_CONNECTION_MANAGER = "envoy.filters.network.http_connection_manager";
  private static final ObjectMapper YAML =
      new ObjectMapper(new YAMLFactory().disable(YAMLGenerator.Feature.WRITE_DOC_START_MARKER));

  /** A listener to create from the shipped one of {@code leg}; port 0 lets Envoy pick. */
  record ListenerSpec(String name, Leg leg, int port, String cluster, boolean extProc) {}

  /** A worker cluster to create from the shipped one of {@code leg}, its one endpoint on loopback. */
  record ClusterSpec(String name, Leg leg, int port) {}

  private SandboxBootstrap() {}

  /** The shipped bootstrap's text, from the jar. */
  static String shippedYaml() {
    try (InputStream in = SandboxBootstrap.class.getResourceAsStream(SHIPPED_RESOURCE)) {
      if (in == null) {
        throw new IllegalStateException(SHIPPED_RESOURCE + " is not in the jar: the build packages it");
      }
      return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new IllegalStateException("cannot read " + SHIPPED_RESOURCE + " from the jar", e);
    }
  }

  /** Every family's two legs, through the service and around it, on {@code ports}. */
  static List<ListenerSpec> listeners(List<Family> families, SandboxPorts ports) {
    List<ListenerSpec> specs = new ArrayList<>();
    for (Family family : families) {
      for (Passage passage : Passage.values()) {
        for (Leg leg : Leg.values()) {
          specs.add(
              new ListenerSpec(
                  passage.listenerName(family, leg),
                  leg,
                  ports.envoyListener(family, passage, leg),
                  family.cluster(leg),
                  passage.extProc()));
        }
      }
    }
    return specs;
  }

  /**
   * The bootstrap: admin on loopback at {@code adminPort}, {@code listeners} and {@code workers} made
   * from the shipped ones, the service's cluster pointed at {@code servicePort}.
   *
   * @param messageTimeout replaces the filter's {@code message_timeout} when present (only on request,
   *     for a machine too busy for the shipped one)
   * @throws IllegalArgumentException when the shipped text lacks a listener or cluster copied here
   */
  static ObjectNode derive(
      String shippedYaml, int adminPort, int servicePort, List<ListenerSpec> listeners, List<ClusterSpec> workers,
      Optional<Duration> messageTimeout) {
    ObjectNode root = readTree(shippedYaml);
    setSocket(root.path("admin").path("address"), adminPort);
    ObjectNode resources = (ObjectNode) root.path("static_resources");
    ArrayNode shippedListeners = array(resources, "listeners");
    ArrayNode shippedClusters = array(resources, "clusters");

    ArrayNode newListeners = YAML.createArrayNode();
    for (ListenerSpec spec : listeners) {
      ObjectNode listener = named(shippedListeners, spec.leg().shippedListener(), "listener").deepCopy();
      listener.put("name", spec.name());
      setSocket(listener.path("address"), spec.port());
      forEachConnectionManager(listener, manager -> adapt(manager, spec, messageTimeout));
      newListeners.add(listener);
    }

    ArrayNode newClusters = YAML.createArrayNode();
    for (ClusterSpec spec : workers) {
      ObjectNode cluster = named(shippedClusters, spec.leg().shippedCluster(), "cluster").deepCopy();
      cluster.put("name", spec.name());
      ((ObjectNode) cluster.path("load_assignment")).put("cluster_name", spec.name());
      setEndpoints(cluster, spec.port());
      newClusters.add(cluster);
    }
    ObjectNode service = named(shippedClusters, SERVICE_CLUSTER, "cluster").deepCopy();
    setEndpoints(service, servicePort);
    newClusters.add(service);

    resources.set("listeners", newListeners);
    resources.set("clusters", newClusters);
    return root;
  }

  /** The bootstrap as YAML, with a comment saying where it comes from. */
  static String render(ObjectNode bootstrap) {
    try {
      return "# Written by `disagg-usage-extproc sandbox` from deploy/envoy/envoy.yaml: the shipped listeners"
          + " and clusters\n# copied per engine family, with sandbox names, loopback addresses and ports;"
          + " listeners named\n# *_without_extproc lack the ext_proc filter. Nothing else differs.\n"
          + YAML.writeValueAsString(bootstrap);
    } catch (JsonProcessingException e) {
      throw new IllegalStateException("a JSON tree always serialises", e);
    }
  }

  /** The sandbox's names and route on one HTTP connection manager; the filter gone around the service. */
  private static void adapt(ObjectNode manager, ListenerSpec spec, Optional<Duration> messageTimeout) {
    manager.put("stat_prefix", spec.name());
    for (JsonNode host : manager.path("route_config").path("virtual_hosts")) {
      for (JsonNode route : host.path("routes")) {
        if (route.path("route").has("cluster")) {
          ((ObjectNode) route.get("route")).put("cluster", spec.cluster());
        }
      }
    }
    Iterator<JsonNode> filters = manager.path("http_filters").elements();
    while (filters.hasNext()) {
      JsonNode filter = filters.next();
      if (!FilterConfigs.FILTER_NAME.equals(filter.path("name").asText())) {
        continue;
      }
      if (!spec.extProc()) {
        filters.remove();
      } else if (messageTimeout.isPresent() && filter.path("typed_config") instanceof ObjectNode config) {
        config.put("message_timeout", Durations.toString(Durations.fromMillis(messageTimeout.get().toMillis())));
      }
    }
  }

  private static void forEachConnectionManager(ObjectNode listener, Consumer<ObjectNode> action) {
    for (JsonNode chain : listener.path("filter_chains")) {
      for (JsonNode filter : chain.path("filters")) {
        if (HTTP_CONNECTION_MANAGER.equals(filter.path("name").asText()) && filter.path("typed_config").isObject()) {
          action.accept((ObjectNode) filter.get("typed_config"));
        }
      }
    }
  }

  /** Every endpoint of the cluster's load assignment at loopback {@code port}. */
  private static void setEndpoints(ObjectNode cluster, int port) {
    for (JsonNode locality : cluster.path("load_assignment").path("endpoints")) {
      for (JsonNode endpoint : locality.path("lb_endpoints")) {
        setSocket(endpoint.path("endpoint").path("address"), port);
      }
    }
  }

  private static void setSocket(JsonNode address, int port) {
    if (!(address.path("socket_address") instanceof ObjectNode socket)) {
      throw new IllegalArgumentException("expected a socket_address in " + address);
    }
    socket.put("address", LOOPBACK);
    socket.put("port_value", port);
  }

  private static ObjectNode named(ArrayNode items, String name, String what) {
    for (JsonNode item : items) {
      if (item instanceof ObjectNode object && name.equals(item.path("name").asText())) {
        return object;
      }
    }
    throw new IllegalArgumentException("the shipped bootstrap has no " + what + " named " + name);
  }

  private static ArrayNode array(ObjectNode parent, String field) {
    if (parent.path(field) instanceof ArrayNode array) {
      return array;
    }
    throw new IllegalArgumentException("the shipped bootstrap has no static_resources." + field);
  }

  private static ObjectNode readTree(String yaml) {
    try {
      if (YAML.readTree(yaml) instanceof ObjectNode root && root.path("static_resources").isObject()) {
        return root;
      }
    } catch (JsonProcessingException e) {
      throw new IllegalArgumentException("the shipped bootstrap is not YAML: " + e.getOriginalMessage(), e);
    }
    throw new IllegalArgumentException("the shipped bootstrap has no static_resources");
  }
}
