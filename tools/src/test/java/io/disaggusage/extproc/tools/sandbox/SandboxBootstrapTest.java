package io.disaggusage.extproc.tools.sandbox;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import io.disaggusage.extproc.testkit.ShippedEnvoyConfig;
import io.disaggusage.extproc.emulator.engines.PrefixCache;
import io.disaggusage.extproc.emulator.engines.TrtLlmEngine;
import io.disaggusage.extproc.emulator.engines.VllmEngine;
import io.disaggusage.extproc.driver.FilterConfigs;
import io.disaggusage.extproc.tools.sandbox.SandboxBootstrap.ClusterSpec;
import java.nio.file.Files;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/**
 * The sandbox's Envoy bootstrap is the shipped deploy/envoy/envoy.yaml with only names, addresses,
 * ports and route clusters changed, and the filter removed from the listeners around the service.
 */
class SandboxBootstrapTest {
  private static final ObjectMapper YAML = new ObjectMapper(new YAMLFactory());
  private static final SandboxPorts PORTS = new SandboxPorts(18000);
  private static final List<Family> FAMILIES =
      List.of(
          new Family("trtllm", 0, new TrtLlmEngine(new PrefixCache(16, 8))),
          new Family("vllm", 1, new VllmEngine(new PrefixCache(16, 8))));

  private final String shipped = SandboxBootstrap.shippedYaml();

  @Test
  void theJarCarriesTheShippedFileAsItIs() throws Exception {
    assertThat(shipped).isEqualTo(Files.readString(ShippedEnvoyConfig.bootstrapFile()));
  }

  @Test
  void everyListenerIsAShippedOneWithSandboxNamesPortsAndCluster() throws Exception {
    ObjectNode bootstrap = derive(Optional.empty());
    ObjectNode original = (ObjectNode) YAML.readTree(shipped);

    List<String> names = new ArrayList<>();
    for (JsonNode listener : bootstrap.path("static_resources").path("listeners")) {
      String name = listener.path("name").asText();
      names.add(name);
      Leg leg = name.contains("_context_") ? Leg.CONTEXT : Leg.GENERATION;
      boolean through = !name.endsWith("_without_extproc");
      JsonNode manager = connectionManager(listener);

      assertThat(listener.path("address").path("socket_address").path("address").asText()).isEqualTo("127.0.0.1");
      assertThat(manager.path("stat_prefix").asText()).isEqualTo(name);
      assertThat(routeCluster(manager)).isEqualTo(name.substring(0, name.indexOf('_')) + "_" + leg.label());
      assertThat(filterNames(manager))
          .containsExactlyElementsOf(
              through
                  ? List.of(FilterConfigs.FILTER_NAME, "envoy.filters.http.router")
                  : List.of("envoy.filters.http.router"));
      if (through) {
        assertThat(FilterConfigs.parse(listener.toString())).isEqualTo(FilterConfigs.parse(shipped));
      }
      assertThat(withoutSandboxChanges(listener))
          .isEqualTo(withoutSandboxChanges(named(original, "listeners", leg.shippedListener())));
    }
    assertThat(names)
        .containsExactly(
            "trtllm_context_egress", "trtllm_generation_egress",
            "trtllm_context_egress_without_extproc", "trtllm_generation_egress_without_extproc",
            "vllm_context_egress", "vllm_generation_egress",
            "vllm_context_egress_without_extproc", "vllm_generation_egress_without_extproc");
    assertThat(ports(bootstrap.path("static_resources").path("listeners")))
        .containsExactly(18010, 18011, 18012, 18013, 18014, 18015, 18016, 18017);
  }

  @Test
  void clustersPointAtTheWorkersAndTheService() throws Exception {
    ObjectNode bootstrap = derive(Optional.empty());
    ObjectNode original = (ObjectNode) YAML.readTree(shipped);
    JsonNode clusters = bootstrap.path("static_resources").path("clusters");

    List<String> names = new ArrayList<>();
    clusters.forEach(c -> names.add(c.path("name").asText()));
    assertThat(names)
        .containsExactly("trtllm_context", "trtllm_generation", "vllm_context", "vllm_generation", "disagg_usage_extproc");
    assertThat(ports(clusters)).containsExactly(18020, 18021, 18022, 18023, 18004);
    for (JsonNode cluster : clusters) {
      String name = cluster.path("name").asText();
      String shippedName = name.equals(SandboxBootstrap.SERVICE_CLUSTER) ? name : name.substring(name.indexOf('_') + 1);
      ObjectNode expected = named(original, "clusters", shippedName).deepCopy();
      ObjectNode actual = ((ObjectNode) cluster).deepCopy();
      for (ObjectNode c : List.of(expected, actual)) {
        c.remove("name");
        ((ObjectNode) c.path("load_assignment")).remove("cluster_name");
        socket(firstEndpoint(c)).removeAll();
      }
      assertThat(actual).as(name).isEqualTo(expected);
      assertThat(cluster.path("load_assignment").path("cluster_name").asText()).isEqualTo(name);
    }
  }

  @Test
  void adminListensOnLoopback() {
    JsonNode socket = derive(Optional.empty()).path("admin").path("address").path("socket_address");

    assertThat(socket.path("address").asText()).isEqualTo("127.0.0.1");
    assertThat(socket.path("port_value").asInt()).isEqualTo(18006);
  }

  @Test
  void aMessageTimeoutIsTheOnlyFilterSettingThatCanChange() {
    ObjectNode bootstrap = derive(Optional.of(Duration.ofSeconds(2)));

    assertThat(FilterConfigs.parse(bootstrap.toString()))
        .isEqualTo(FilterConfigs.withMessageTimeout(FilterConfigs.parse(shipped), Duration.ofSeconds(2)));
  }

  @Test
  void theRenderedYamlReadsBackTheSame() throws Exception {
    ObjectNode bootstrap = derive(Optional.empty());

    String yaml = SandboxBootstrap.render(bootstrap);

    assertThat(yaml).startsWith("# Written by `disagg-usage-extproc sandbox` from deploy/envoy/envoy.yaml");
    assertThat(YAML.readTree(yaml)).isEqualTo(bootstrap);
  }

  @Test
  void aShippedFileWithoutTheCopiedListenerIsRefused() {
    String renamed = shipped.replace("name: context_egress", "name: prefill_egress");
    List<SandboxBootstrap.ListenerSpec> listeners = SandboxBootstrap.listeners(FAMILIES, PORTS);

    assertThatThrownBy(() -> SandboxBootstrap.derive(renamed, 0, 0, listeners, List.of(), Optional.empty()))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("the shipped bootstrap has no listener named context_egress");
  }

  private ObjectNode derive(Optional<Duration> messageTimeout) {
    List<ClusterSpec> workers = new ArrayList<>();
    for (Family family : FAMILIES) {
      for (Leg leg : Leg.values()) {
        workers.add(new ClusterSpec(family.cluster(leg), leg, PORTS.worker(family, leg)));
      }
    }
    List<SandboxBootstrap.ListenerSpec> listeners = SandboxBootstrap.listeners(FAMILIES, PORTS);
    return SandboxBootstrap.derive(shipped, PORTS.envoyAdmin(), PORTS.serviceGrpc(), listeners, workers, messageTimeout);
  }

  /** The listener with what the sandbox sets blanked and without the filter the sandbox may remove. */
  private static ObjectNode withoutSandboxChanges(JsonNode listener) {
    ObjectNode copy = ((ObjectNode) listener).deepCopy();
    copy.remove("name");
    socket(copy).removeAll();
    ObjectNode manager = connectionManager(copy);
    manager.remove("stat_prefix");
    for (JsonNode host : manager.path("route_config").path("virtual_hosts")) {
      host.path("routes").forEach(route -> ((ObjectNode) route.path("route")).remove("cluster"));
    }
    ArrayNode filters = (ArrayNode) manager.path("http_filters");
    for (int i = filters.size() - 1; i >= 0; i--) {
      if (filters.get(i).path("name").asText().equals(FilterConfigs.FILTER_NAME)) {
        filters.remove(i);
      }
    }
    return copy;
  }

  private static ObjectNode connectionManager(JsonNode listener) {
    return (ObjectNode) listener.path("filter_chains").path(0).path("filters").path(0).path("typed_config");
  }

  private static String routeCluster(JsonNode manager) {
    JsonNode route = manager.path("route_config").path("virtual_hosts").path(0).path("routes").path(0);
    return route.path("route").path("cluster").asText();
  }

  private static List<String> filterNames(JsonNode manager) {
    List<String> names = new ArrayList<>();
    manager.path("http_filters").forEach(f -> names.add(f.path("name").asText()));
    return names;
  }

  private static ObjectNode socket(JsonNode node) {
    return (ObjectNode) node.path("address").path("socket_address");
  }

  private static List<Integer> ports(JsonNode items) {
    List<Integer> ports = new ArrayList<>();
    for (JsonNode item : items) {
      ports.add(socket(item.has("address") ? item : firstEndpoint(item)).path("port_value").asInt());
    }
    return ports;
  }

  private static JsonNode firstEndpoint(JsonNode cluster) {
    return cluster.path("load_assignment").path("endpoints").path(0).path("lb_endpoints").path(0).path("endpoint");
  }

  private static ObjectNode named(ObjectNode bootstrap, String section, String name) {
    for (JsonNode item : bootstrap.path("static_resources").path(section)) {
      if (item.path("name").asText().equals(name)) {
        return (ObjectNode) item;
      }
    }
    throw new AssertionError("no " + name + " in " + section);
  }
}
