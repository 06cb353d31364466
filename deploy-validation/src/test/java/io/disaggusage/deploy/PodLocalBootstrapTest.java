package io.disaggusage.deploy;

import static org.assertj.core.api.Assertions.assertThat;

import io.envoyproxy.envoy.config.bootstrap.v3.Bootstrap;
import io.envoyproxy.envoy.config.cluster.v3.Cluster;
import io.envoyproxy.envoy.config.core.v3.SocketAddress;
import io.envoyproxy.envoy.config.route.v3.Route;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor;
import io.envoyproxy.envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * deploy/envoy/pod-local/{prefill,decode}.yaml — the Envoy beside each worker — parsed strictly into
 * Envoy's Bootstrap: one listener to one pod-local engine cluster named after the pod's role, and
 * everything else (ext_proc filter, access log, timeouts, the processor's cluster apart from how it is
 * addressed) equal to deploy/envoy/envoy.yaml. Real Envoy validates both files in RealEnvoyValidateTest.
 */
class PodLocalBootstrapTest {
  /** One pod-local bootstrap and the role its cluster names. */
  record Role(String file, String listener, String engineCluster, int servingPort) {
    Path path() {
      return ProjectFiles.resolve("deploy/envoy/pod-local/" + file);
    }

    Bootstrap bootstrap() {
      return EnvoyProtos.bootstrap(YamlDocuments.single(path()));
    }

    @Override
    public String toString() {
      return file;
    }
  }

  static final Role PREFILL = new Role("prefill.yaml", "prefill_inbound", "prefill_local", 8000);
  static final Role DECODE = new Role("decode.yaml", "decode_inbound", "decode_local", 8200);
  static final String EXT_PROC_CLUSTER = "disagg_usage_extproc";
  /** The engine's pod-local port, behind Envoy. */
  static final int ENGINE_PORT = 30001;

  static Stream<Role> roles() {
    return Stream.of(PREFILL, DECODE);
  }

  static Cluster cluster(Bootstrap b, String name) {
    return b.getStaticResources().getClustersList().stream().filter(c -> c.getName().equals(name)).findFirst()
        .orElseThrow(() -> new AssertionError("no cluster " + name));
  }

  static SocketAddress onlyEndpoint(Cluster c) {
    assertThat(c.getLoadAssignment().getEndpointsList()).hasSize(1);
    assertThat(c.getLoadAssignment().getEndpoints(0).getLbEndpointsList()).hasSize(1);
    return c.getLoadAssignment().getEndpoints(0).getLbEndpoints(0).getEndpoint().getAddress().getSocketAddress();
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("roles")
  void parsesStrictlyWithNoDeprecatedFields(Role role) {
    assertThat(EnvoyProtos.deprecatedFields(role.bootstrap())).isEmpty();
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("roles")
  void oneListenerOnTheServingPortRoutesEverythingToTheEngineOnLoopback(Role role) throws Exception {
    Bootstrap b = role.bootstrap();
    assertThat(b.getStaticResources().getListenersList()).singleElement().satisfies(l -> {
      assertThat(l.getName()).isEqualTo(role.listener());
      assertThat(l.getAddress().getSocketAddress().getPortValue()).isEqualTo(role.servingPort());
      assertThat(l.getAddress().getSocketAddress().getAddress()).as("the pod IP: all interfaces").isEqualTo("0.0.0.0");
    });
    HttpConnectionManager hcm = EnvoyBootstrapTest.hcm(b);
    List<Route> routes = hcm.getRouteConfig().getVirtualHostsList().stream().flatMap(v -> v.getRoutesList().stream()).toList();
    assertThat(routes).isNotEmpty().allSatisfy(r -> {
      assertThat(r.getRoute().getCluster()).isEqualTo(role.engineCluster());
      assertThat(r.getRoute().getTimeout().getSeconds()).as("route timeout (0 = none)").isZero();
    });
    SocketAddress engine = onlyEndpoint(cluster(b, role.engineCluster()));
    assertThat(engine.getAddress()).isEqualTo("127.0.0.1");
    assertThat(engine.getPortValue()).isEqualTo(ENGINE_PORT);
    assertThat(b.getStaticResources().getClustersList()).extracting(Cluster::getName)
        .containsExactlyInAnyOrder(role.engineCluster(), EXT_PROC_CLUSTER);
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("roles")
  void filterAccessLogAndTimeoutsAreThoseOfTheShippedBootstrap(Role role) throws Exception {
    HttpConnectionManager shipped = EnvoyBootstrapTest.hcm(EnvoyBootstrapTest.bootstrap());
    HttpConnectionManager local = EnvoyBootstrapTest.hcm(role.bootstrap());
    assertThat(local.getHttpFiltersList()).isEqualTo(shipped.getHttpFiltersList());
    assertThat(ExtProcBaseline.violations(local.getHttpFilters(0).getTypedConfig().unpack(ExternalProcessor.class)))
        .isEmpty();
    assertThat(local.getAccessLogList()).isEqualTo(shipped.getAccessLogList());
    assertThat(local.getStreamIdleTimeout()).isEqualTo(shipped.getStreamIdleTimeout());
    assertThat(local.getRequestTimeout()).isEqualTo(shipped.getRequestTimeout());
    assertThat(local.getCodecType()).isEqualTo(shipped.getCodecType());
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("roles")
  void processorClusterIsTheShippedOneAddressedThroughTheCentralHeadlessService(Role role) {
    Cluster shipped = cluster(EnvoyBootstrapTest.bootstrap(), EXT_PROC_CLUSTER);
    Cluster local = cluster(role.bootstrap(), EXT_PROC_CLUSTER);
    assertThat(ExtProcClusterHealth.violations(local)).isEmpty();
    // Health checks, outlier detection, circuit breakers, HTTP/2 options: unchanged.
    assertThat(local.toBuilder().clearType().clearLoadAssignment().build())
        .isEqualTo(shipped.toBuilder().clearType().clearLoadAssignment().build());
    assertThat(local.getType()).as("one address per replica").isEqualTo(Cluster.DiscoveryType.STRICT_DNS);
    SocketAddress service = onlyEndpoint(local);
    assertThat(service.getAddress()).isEqualTo(PodLocalManifestTest.EXT_PROC_HEADLESS_DNS);
    assertThat(service.getPortValue()).isEqualTo(KubernetesPolicies.DEFAULT_GRPC_PORT);
  }
}
