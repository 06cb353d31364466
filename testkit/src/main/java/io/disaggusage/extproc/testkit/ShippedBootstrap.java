package io.disaggusage.extproc.testkit;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import io.disaggusage.extproc.driver.FilterConfigs;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.List;

/**
 * {@code deploy/envoy/envoy.yaml} as a test or a benchmark runs it: only the admin port, the two listeners'
 * addresses and the endpoints of the three clusters change. Everything a user deploys — filter settings,
 * timeouts, health checks, access log — is the shipped file's. A shape the rewrite does not expect fails
 * loudly, so nobody silently runs a config other than the shipped one. Shared by the e2e suite and the
 * bench module's run through real Envoy, so both measure and test the same derivation.
 */
public final class ShippedBootstrap {
  public static final ObjectMapper YAML = new ObjectMapper(new YAMLFactory());
  public static final String LOOPBACK = "127.0.0.1";

  /** The service settings {@code deploy/envoy/envoy.yaml} names in its header comment (its cluster names). */
  public static final List<String> SERVICE_SETTINGS =
      List.of("--set", "classification.context_clusters=context", "--set", "classification.generation_clusters=generation");

  /** The ports a test assigns; each worker and service list becomes the cluster's endpoints. */
  public record Topology(
      int adminPort,
      int contextListener,
      int generationListener,
      List<Integer> contextWorkers,
      List<Integer> generationWorkers,
      List<Integer> services) {}

  private ShippedBootstrap() {}

  public static ObjectNode rewrite(Path shipped, Topology topology) {
    ObjectNode root;
    try {
      root = (ObjectNode) YAML.readTree(shipped.toFile());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    socket(root.path("admin").path("address"), topology.adminPort());
    ObjectNode resources = (ObjectNode) root.path("static_resources");
    socket(named(resources, "listeners", "context_egress").path("address"), topology.contextListener());
    socket(named(resources, "listeners", "generation_egress").path("address"), topology.generationListener());
    endpoints(named(resources, "clusters", "context"), LOOPBACK, topology.contextWorkers());
    endpoints(named(resources, "clusters", "generation"), LOOPBACK, topology.generationWorkers());
    endpoints(named(resources, "clusters", "disagg_usage_extproc"), LOOPBACK, topology.services());
    return root;
  }

  /**
   * The bootstrap without the ext_proc HTTP filter on either listener: the same Envoy with nothing
   * between it and the workers, the floor a benchmark measures the filter's cost against. The service's
   * cluster stays (unused), so nothing else differs.
   */
  public static ObjectNode withoutExtProc(ObjectNode bootstrap) {
    ObjectNode copy = bootstrap.deepCopy();
    int removed = 0;
    for (JsonNode listener : copy.path("static_resources").path("listeners")) {
      for (JsonNode chain : listener.path("filter_chains")) {
        for (JsonNode filter : chain.path("filters")) {
          java.util.Iterator<JsonNode> httpFilters = filter.path("typed_config").path("http_filters").elements();
          while (httpFilters.hasNext()) {
            if (FilterConfigs.FILTER_NAME.equals(httpFilters.next().path("name").asText())) {
              httpFilters.remove();
              removed++;
            }
          }
        }
      }
    }
    if (removed == 0) {
      throw new AssertionError("the shipped bootstrap has no " + FilterConfigs.FILTER_NAME + " filter to remove");
    }
    return copy;
  }

  /**
   * Envoy's own record of how long each of its ext_proc calls waited for the processor ({@code ExtProcLoggingInfo}
   * of the ext_proc filter, in microseconds; a body's is the sum over its calls): the processor's share of a
   * request, apart from what the upstream took.
   */
  public static final List<String> EXT_PROC_LATENCIES = List.of(
      "request_header_latency_us", "request_body_total_latency_us", "response_header_latency_us",
      "response_body_total_latency_us");
  /** What {@link #withExtProcLatencies} puts before each field's name in the access-log line. */
  public static final String EXT_PROC_LATENCY_PREFIX = "xp_";

  /**
   * Microseconds from Envoy's first byte in from the client to its last byte back ({@code DS_RX_BEG} to
   * {@code DS_TX_END}): the request's whole stay, the upstream's time and every filter's included.
   */
  public static final String ENVOY_SPAN = "t_envoy_us";
  /** Microseconds from the first byte Envoy sent upstream to the last it received back ({@code US_TX_BEG} to {@code US_RX_END}). */
  public static final String UPSTREAM_SPAN = "t_upstream_us";

  /**
   * The bootstrap with every listener's access-log line ending in {@link #ENVOY_SPAN} and {@link #UPSTREAM_SPAN}
   * (so a request's time inside Envoy is the one less the other) and {@link #EXT_PROC_LATENCIES}, each as
   * {@code xp_<field>=%FILTER_STATE(envoy.filters.http.ext_proc:FIELD:<field>)%} ({@code -} where the
   * request had no ext_proc filter or call); the rest of the line is the shipped one.
   */
  public static ObjectNode withExtProcLatencies(ObjectNode bootstrap) {
    ObjectNode copy = bootstrap.deepCopy();
    StringBuilder fields = new StringBuilder()
        .append(' ').append(ENVOY_SPAN).append("=%COMMON_DURATION(DS_RX_BEG:DS_TX_END:us)%")
        .append(' ').append(UPSTREAM_SPAN).append("=%COMMON_DURATION(US_TX_BEG:US_RX_END:us)%");
    for (String field : EXT_PROC_LATENCIES) {
      fields.append(' ').append(EXT_PROC_LATENCY_PREFIX).append(field)
          .append("=%FILTER_STATE(envoy.filters.http.ext_proc:FIELD:").append(field).append(")%");
    }
    for (JsonNode listener : copy.path("static_resources").path("listeners")) {
      JsonNode format = listener.at("/filter_chains/0/filters/0/typed_config/access_log/0/typed_config/log_format/text_format_source");
      String line = format.path("inline_string").asText();
      if (!(format instanceof ObjectNode text) || !line.endsWith("\n")) {
        throw new AssertionError("expected a text access-log format ending in a newline on listener " + listener.path("name"));
      }
      text.put("inline_string", line.substring(0, line.length() - 1) + fields + "\n");
    }
    return copy;
  }

  public static String yaml(JsonNode bootstrap) {
    try {
      return YAML.writeValueAsString(bootstrap);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** The HTTP filter list of listener {@code listener}'s connection manager, to edit in place. */
  public static ArrayNode httpFilters(ObjectNode bootstrap, String listener) {
    return (ArrayNode) named(bootstrap.path("static_resources"), "listeners", listener)
        .at("/filter_chains/0/filters/0/typed_config/http_filters");
  }

  /** Where the filter named {@code name} is in {@code filters}. */
  public static int indexOf(ArrayNode filters, String name) {
    for (int i = 0; i < filters.size(); i++) {
      if (filters.get(i).path("name").asText().equals(name)) {
        return i;
      }
    }
    throw new AssertionError(name + " is not in " + filters);
  }

  public static ObjectNode named(JsonNode parent, String list, String name) {
    for (JsonNode item : parent.path(list)) {
      if (name.equals(item.path("name").asText())) {
        return (ObjectNode) item;
      }
    }
    throw new AssertionError("the shipped bootstrap has no " + list + " entry named " + name);
  }

  private static void socket(JsonNode address, int port) {
    ObjectNode socket = socketAddress(address);
    socket.put("address", LOOPBACK);
    socket.put("port_value", port);
  }

  /** The {@code socket_address} of an {@code address}; another shape fails. */
  public static ObjectNode socketAddress(JsonNode address) {
    if (!(address.path("socket_address") instanceof ObjectNode socket)) {
      throw new AssertionError("expected a socket_address in " + address);
    }
    return socket;
  }

  /** Replaces the cluster's one endpoint by one per port on {@code address}; another shape fails. */
  public static void endpoints(ObjectNode cluster, String address, List<Integer> ports) {
    JsonNode localities = cluster.path("load_assignment").path("endpoints");
    if (localities.size() != 1 || localities.get(0).path("lb_endpoints").size() != 1) {
      throw new AssertionError("expected one locality with one endpoint in cluster " + cluster.path("name"));
    }
    ArrayNode endpoints = ((ObjectNode) localities.get(0)).putArray("lb_endpoints");
    for (int port : ports) {
      ObjectNode socket = endpoints.addObject().putObject("endpoint").putObject("address").putObject("socket_address");
      socket.put("address", address);
      socket.put("port_value", port);
    }
  }
}
