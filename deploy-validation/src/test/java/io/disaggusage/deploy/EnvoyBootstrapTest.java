package io.disaggusage.deploy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.envoyproxy.envoy.config.bootstrap.v3.Bootstrap;
import io.envoyproxy.envoy.config.cluster.v3.Cluster;
import io.envoyproxy.envoy.config.route.v3.Route;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor;
import io.envoyproxy.envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager;
import io.envoyproxy.envoy.extensions.filters.network.http_connection_manager.v3.HttpFilter;
import io.envoyproxy.envoy.extensions.upstreams.http.v3.HttpProtocolOptions;
import java.nio.file.Path;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/** deploy/envoy/envoy.yaml, parsed strictly into Envoy's Bootstrap and checked against the baseline. */
class EnvoyBootstrapTest {
  static final Path FILE = ProjectFiles.resolve("deploy/envoy/envoy.yaml");

  static Bootstrap bootstrap() {
    return EnvoyProtos.bootstrap(YamlDocuments.single(FILE));
  }

  /** The HTTP connection manager of every listener. */
  static List<HttpConnectionManager> hcms(Bootstrap b) throws Exception {
    List<HttpConnectionManager> out = new java.util.ArrayList<>();
    for (var listener : b.getStaticResources().getListenersList()) {
      out.add(listener.getFilterChains(0).getFilters(0).getTypedConfig().unpack(HttpConnectionManager.class));
    }
    return out;
  }

  static HttpConnectionManager hcm(Bootstrap b) throws Exception {
    return hcms(b).get(0);
  }

  @Test
  void parsesStrictlyWithNoDeprecatedFields() {
    Bootstrap b = bootstrap();
    assertThat(EnvoyProtos.deprecatedFields(b)).isEmpty();
  }

  @Test
  void everyListenerHasTheSameBaselineExtProcFilterBeforeTheRouter() throws Exception {
    List<HttpConnectionManager> hcms = hcms(bootstrap());
    assertThat(hcms).hasSizeGreaterThanOrEqualTo(2);
    ExternalProcessor first = null;
    for (HttpConnectionManager hcm : hcms) {
      List<HttpFilter> filters = hcm.getHttpFiltersList();
      assertThat(filters).extracting(HttpFilter::getName)
          .containsExactly("envoy.filters.http.ext_proc", "envoy.filters.http.router");
      ExternalProcessor extProc = filters.get(0).getTypedConfig().unpack(ExternalProcessor.class);
      assertThat(ExtProcBaseline.violations(extProc)).isEmpty();
      assertThat(EnvoyProtos.deprecatedFields(extProc)).isEmpty();
      // The scenario suite reads the first one; they must all be the same.
      if (first == null) {
        first = extProc;
      } else {
        assertThat(extProc).isEqualTo(first);
      }
      assertThat(hcm.getAccessLogCount()).isPositive();
    }
  }

  @Test
  void extProcClusterSpeaksHttp2FindsDeadAndLateReplicasAndHasRaisedCircuitBreakers() throws Exception {
    Bootstrap b = bootstrap();
    HttpConnectionManager hcm = hcm(b);
    ExternalProcessor extProc = hcm.getHttpFilters(0).getTypedConfig().unpack(ExternalProcessor.class);
    String name = extProc.getGrpcService().getEnvoyGrpc().getClusterName();
    Cluster cluster =
        b.getStaticResources().getClustersList().stream().filter(c -> c.getName().equals(name)).findFirst().orElseThrow();
    HttpProtocolOptions options =
        cluster.getTypedExtensionProtocolOptionsOrThrow("envoy.extensions.upstreams.http.v3.HttpProtocolOptions")
            .unpack(HttpProtocolOptions.class);
    assertThat(options.getExplicitHttpConfig().hasHttp2ProtocolOptions()).isTrue();
    assertThat(ExtProcClusterHealth.violations(cluster)).isEmpty();
    assertThat(cluster.getCircuitBreakers().getThresholdsList())
        .allSatisfy(t -> {
          assertThat(t.getMaxRequests().getValue()).isGreaterThanOrEqualTo(10_000);
          assertThat(t.getMaxPendingRequests().getValue()).isGreaterThanOrEqualTo(10_000);
        });
  }

  @Test
  void routesReachDeclaredClustersWithoutATimeoutThatCutsGenerations() throws Exception {
    Bootstrap b = bootstrap();
    Set<String> clusters = b.getStaticResources().getClustersList().stream().map(Cluster::getName).collect(Collectors.toSet());
    List<Route> routes = new java.util.ArrayList<>();
    for (HttpConnectionManager hcm : hcms(b)) {
      hcm.getRouteConfig().getVirtualHostsList().forEach(v -> routes.addAll(v.getRoutesList()));
    }
    assertThat(routes).isNotEmpty();
    for (Route r : routes) {
      assertThat(clusters).contains(r.getRoute().getCluster());
      assertThat(r.getRoute().getTimeout().getSeconds()).as("route timeout (0 = none)").isZero();
    }
    assertThat(clusters).contains("context", "generation");
  }

  @Test
  void accessLogPrintsTheCorrectedUsage() throws Exception {
    String text = YamlDocuments.single(FILE).toString();
    assertThat(text)
        .contains("%DYNAMIC_METADATA(disagg_usage:cached_tokens)%")
        .contains("%DYNAMIC_METADATA(disagg_usage:outcome)%")
        .contains("%DYNAMIC_METADATA(disagg_usage:reported_cached_tokens)%");
    assertThat(hcm(bootstrap()).getAccessLogCount()).isPositive();
  }

  @Test
  void strictParsingRejectsTyposAndBadEnums() {
    JsonNode good = YamlDocuments.single(FILE);
    ObjectNode typo = good.deepCopy();
    ((ObjectNode) typo.at("/static_resources/listeners/0/filter_chains/0/filters/0/typed_config/http_filters/0/typed_config"))
        .put("failure_mode_alow", true);
    assertThatThrownBy(() -> EnvoyProtos.bootstrap(typo)).hasMessageContaining("failure_mode_alow");
    ObjectNode badEnum = good.deepCopy();
    ((ObjectNode) badEnum.at("/static_resources/listeners/0/filter_chains/0/filters/0/typed_config/http_filters/0/typed_config/processing_mode"))
        .put("response_body_mode", "FULL_DUPLEX");
    assertThatThrownBy(() -> EnvoyProtos.bootstrap(badEnum)).hasMessageContaining("FULL_DUPLEX");
    ObjectNode deprecated = good.deepCopy();
    ((ObjectNode) deprecated.at("/static_resources/clusters/2")).putObject("http2_protocol_options");
    assertThat(EnvoyProtos.deprecatedFields(EnvoyProtos.bootstrap(deprecated)))
        .anySatisfy(f -> assertThat(f).contains("http2_protocol_options"));
  }

  @Test
  void clusterHealthCheckerCatchesEachDeparture() throws Exception {
    Bootstrap b = bootstrap();
    Cluster good = b.getStaticResources().getClustersList().stream()
        .filter(c -> c.getName().equals("disagg_usage_extproc")).findFirst().orElseThrow();
    assertThat(ExtProcClusterHealth.violations(good)).isEmpty();
    var slowStart = good.toBuilder();
    slowStart.getHealthChecksBuilder(0).clearNoTrafficInterval();
    assertThat(ExtProcClusterHealth.violations(slowStart.build())).singleElement().asString().contains("no_traffic_interval");
    var slowRecheck = good.toBuilder();
    slowRecheck.getHealthChecksBuilder(0).clearUnhealthyInterval().setInterval(com.google.protobuf.util.Durations.fromSeconds(5));
    assertThat(ExtProcClusterHealth.violations(slowRecheck.build())).singleElement().asString().contains("unhealthy_interval");
    var shortTimeout = good.toBuilder();
    shortTimeout.getHealthChecksBuilder(0).setTimeout(com.google.protobuf.util.Durations.fromSeconds(1));
    assertThat(ExtProcClusterHealth.violations(shortTimeout.build())).singleElement().asString().contains("timeout");
    assertThat(ExtProcClusterHealth.violations(good.toBuilder().clearHealthChecks().build()))
        .singleElement().asString().contains("gRPC health check");
    assertThat(ExtProcClusterHealth.violations(good.toBuilder().clearOutlierDetection().build()))
        .singleElement().asString().contains("outlier_detection");
    var unsplit = good.toBuilder();
    unsplit.getOutlierDetectionBuilder().setSplitExternalLocalOriginErrors(false);
    assertThat(ExtProcClusterHealth.violations(unsplit.build())).hasSize(1);
    var ejectAll = good.toBuilder();
    ejectAll.getOutlierDetectionBuilder().setMaxEjectionPercent(com.google.protobuf.UInt32Value.of(100));
    assertThat(ExtProcClusterHealth.violations(ejectAll.build())).singleElement().asString().contains("lone host");
    var ejectOne = good.toBuilder();
    ejectOne.getOutlierDetectionBuilder().setAlwaysEjectOneHost(com.google.protobuf.BoolValue.of(true));
    assertThat(ExtProcClusterHealth.violations(ejectOne.build())).singleElement().asString().contains("lone host");
  }

  @Test
  void baselineCheckerCatchesEachDeparture() {
    ExternalProcessor good =
        ExternalProcessor.newBuilder()
            .setAllowModeOverride(true)
            .setFailureModeAllow(true)
            .addRequestAttributes("xds.cluster_name")
            .setMaxMessageTimeout(com.google.protobuf.util.Durations.fromSeconds(3))
            .setGrpcService(io.envoyproxy.envoy.config.core.v3.GrpcService.newBuilder()
                .setEnvoyGrpc(io.envoyproxy.envoy.config.core.v3.GrpcService.EnvoyGrpc.newBuilder().setClusterName("x")))
            .setMetadataOptions(
                io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.MetadataOptions.newBuilder()
                    .setReceivingNamespaces(
                        io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.MetadataOptions.MetadataNamespaces.newBuilder()
                            .addUntyped("disagg_usage")))
            .build();
    assertThat(ExtProcBaseline.violations(good)).isEmpty();
    assertThat(ExtProcBaseline.violations(good.toBuilder().setFailureModeAllow(false).build())).hasSize(1);
    assertThat(ExtProcBaseline.violations(good.toBuilder().setAllowModeOverride(false).build())).hasSize(1);
    assertThat(ExtProcBaseline.violations(good.toBuilder().clearRequestAttributes().build())).hasSize(1);
    assertThat(ExtProcBaseline.violations(good.toBuilder().setMaxMessageTimeout(com.google.protobuf.util.Durations.fromSeconds(1)).build())).hasSize(1);
    assertThat(ExtProcBaseline.violations(good.toBuilder().clearMetadataOptions().build())).hasSize(1);
    var streamed = good.toBuilder();
    streamed.getProcessingModeBuilder().setResponseBodyMode(
        io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode.STREAMED);
    assertThat(ExtProcBaseline.violations(streamed.build())).hasSize(1);
  }
}
