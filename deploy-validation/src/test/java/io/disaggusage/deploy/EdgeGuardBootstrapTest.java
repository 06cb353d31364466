package io.disaggusage.deploy;

import static org.assertj.core.api.Assertions.assertThat;

import io.envoyproxy.envoy.config.bootstrap.v3.Bootstrap;
import io.envoyproxy.envoy.config.cluster.v3.Cluster;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.BodySendMode;
import io.envoyproxy.envoy.extensions.filters.http.ext_proc.v3.ProcessingMode.HeaderSendMode;
import io.envoyproxy.envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager;
import io.envoyproxy.envoy.extensions.filters.network.http_connection_manager.v3.HttpFilter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * deploy/envoy/edge-guard/envoy.yaml, parsed strictly into Envoy's Bootstrap: the client listener's
 * ext_proc filter is the edge guard's (before the router, failing open, headers only until the guard
 * turns a body on, responses never sent), its cluster finds dead and late replicas like the usage
 * service's, and the header comment's command starts the edge role on the port the cluster names.
 */
class EdgeGuardBootstrapTest {
  static final Path FILE = ProjectFiles.resolve("deploy/envoy/edge-guard/envoy.yaml");

  static Bootstrap bootstrap() {
    return EnvoyProtos.bootstrap(YamlDocuments.single(FILE));
  }

  static ExternalProcessor edgeFilter(Bootstrap b) throws Exception {
    HttpConnectionManager hcm = EnvoyBootstrapTest.hcm(b);
    List<HttpFilter> filters = hcm.getHttpFiltersList();
    assertThat(filters).extracting(HttpFilter::getName)
        .containsExactly("envoy.filters.http.ext_proc", "envoy.filters.http.router");
    return filters.get(0).getTypedConfig().unpack(ExternalProcessor.class);
  }

  @Test
  void parsesStrictlyWithNoDeprecatedFields() {
    assertThat(EnvoyProtos.deprecatedFields(bootstrap())).isEmpty();
  }

  @Test
  void theClientListenerRunsTheEdgeGuardFailingOpen() throws Exception {
    Bootstrap b = bootstrap();
    assertThat(b.getStaticResources().getListenersList()).hasSize(1);
    HttpConnectionManager hcm = EnvoyBootstrapTest.hcm(b);
    assertThat(hcm.getUseRemoteAddress().getValue()).as("Envoy makes the x-request-id of external requests").isTrue();
    ExternalProcessor edge = edgeFilter(b);
    assertThat(edge.getFailureModeAllow()).as("a guard that is away must not take the API down").isTrue();
    assertThat(edge.getAllowModeOverride()).isTrue();
    ProcessingMode mode = edge.getProcessingMode();
    // request headers only; the guard turns on the bodies it checks, responses are never sent
    assertThat(List.of(mode.getRequestHeaderMode(), mode.getResponseHeaderMode(), mode.getRequestTrailerMode(),
            mode.getResponseTrailerMode()))
        .containsExactly(HeaderSendMode.SEND, HeaderSendMode.SKIP, HeaderSendMode.SKIP, HeaderSendMode.SKIP);
    assertThat(List.of(mode.getRequestBodyMode(), mode.getResponseBodyMode())).containsOnly(BodySendMode.NONE);
    assertThat(edge.getMessageTimeout().getSeconds()).as("room for a GC pause").isEqualTo(1);
    assertThat(EnvoyProtos.deprecatedFields(edge)).isEmpty();
    hcm.getRouteConfig().getVirtualHostsList().forEach(v -> v.getRoutesList().forEach(r -> {
      assertThat(r.getRoute().getCluster()).isEqualTo("orchestrator");
      assertThat(r.getRoute().getTimeout().getSeconds()).as("route timeout (0 = none)").isZero();
    }));
  }

  @Test
  void theGuardsClusterFindsDeadAndLateReplicasAndTheCommentStartsTheEdgeRoleOnItsPort() throws Exception {
    Bootstrap b = bootstrap();
    String name = edgeFilter(b).getGrpcService().getEnvoyGrpc().getClusterName();
    Cluster cluster =
        b.getStaticResources().getClustersList().stream().filter(c -> c.getName().equals(name)).findFirst().orElseThrow();
    assertThat(ExtProcClusterHealth.violations(cluster)).isEmpty();
    int port =
        cluster.getLoadAssignment().getEndpoints(0).getLbEndpoints(0).getEndpoint().getAddress().getSocketAddress().getPortValue();
    Matcher command =
        Pattern.compile("(?m)^#\\s+java -jar \\S+ (.*)$").matcher(Files.readString(FILE));
    assertThat(command.find()).as("the header comment's java command").isTrue();
    assertThat(command.group(1)).contains("--set edge_guard.enabled=true").contains("--grpc-port " + port);
    assertThat(port).as("beside a usage service on 9002").isNotEqualTo(9002);
  }
}
