package io.disaggusage.e2e;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.disaggusage.extproc.driver.FilterConfigs;
import io.disaggusage.extproc.emulator.engines.UsageVariant;
import io.disaggusage.extproc.emulator.workers.EngineKind;
import io.disaggusage.extproc.emulator.workers.EngineWorker;
import io.disaggusage.extproc.emulator.workers.WorkerRole;
import io.disaggusage.extproc.emulator.workers.WorkerSpec;
import io.disaggusage.extproc.testkit.AccessLogLine;
import io.disaggusage.extproc.testkit.ChildProcess;
import io.disaggusage.extproc.testkit.FreePorts;
import io.disaggusage.extproc.testkit.ShippedBootstrap;
import io.disaggusage.extproc.testkit.ShippedBootstrap.Topology;
import io.disaggusage.extproc.testkit.Wire;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * llm-d v0.10's coordinator topology without Kubernetes, every part on 127.0.0.1, as llm-d-router's own
 * {@code deploy/environments/dev/coordinator-e2e-infra/envoy.yaml} lays it out with one EPP for every phase:
 * <ul>
 *   <li>one Envoy listener (the gateway). A request without {@code EPP-Profile} (the client's) goes to the
 *       coordinator, with both ext_proc filters off on that route. A request with it (the coordinator's call
 *       back, once per phase) runs through two ext_proc filters — llm-d's EPP, which picks a worker and names it
 *       in {@code x-gateway-destination-endpoint}, and this project's service with the shipped filter settings
 *       ({@code deploy/envoy/envoy.yaml}'s), on the route or on the cluster ({@link Placement}) — and goes to an
 *       {@code ORIGINAL_DST} cluster that reads that header;
 *   <li>the coordinator ({@code coordinator --config}: NIXL connector, steps {@code prefill} then {@code decode}),
 *       whose gateway is that listener;
 *   <li>the EPP ({@code epp} with the {@code file-discovery} plugin: the two workers in a YAML file, labelled
 *       {@code llm-d.ai/role: prefill|decode}; the {@code header-profile-handler} runs the profile the
 *       {@code EPP-Profile} header names, as the upstream coordinator e2e configures it);
 *   <li>the shipped jar with its shipped settings ({@link ServiceProcess}); it classifies the legs by their bodies
 *       (the phase route's cluster is neither of the shipped names) and joins them by the coordinator's
 *       {@code x-request-id};
 *   <li>a simulated vLLM prefill worker and a decode worker with vLLM's NIXL miscount ({@code prompt_tokens - 1}
 *       cached, {@link UsageVariant#BUG}), optionally each behind a {@link RecordingHop} so a test can compare the
 *       client's bytes with the decode engine's.
 * </ul>
 */
final class LlmdCoordinatorDeployment implements AutoCloseable {
  /**
   * Where the service's ext_proc filter stands. Responses cross a chain's filters in reverse order. Envoy before 1.40
   * loses response bodies with two ext_proc filters in one chain when one is FULL_DUPLEX_STREAMED (the EPP), as 1.40's
   * changelog says it fixed ({@link #keepsBodiesInOneChain}); an upstream filter on the phase cluster is a chain of its
   * own.
   */
  enum Placement {
    /** On the phase route after the EPP: the service rewrites a response before the EPP reads it. */
    EPP_FIRST,
    /** On the phase route before the EPP: the EPP reads the decode worker's own usage. */
    SERVICE_FIRST,
    /** An upstream HTTP filter of the phase cluster (before {@code upstream_codec}), the EPP alone on the route. */
    SERVICE_ON_CLUSTER,
    /** The EPP alone, as llm-d ships the gateway: the same flows without the service (which runs, unused). */
    EPP_ALONE
  }

  /** The HTTP filter name of llm-d's EPP on the phase route (the service's filter keeps its shipped name). */
  static final String EPP_FILTER = "llm-d.epp";
  static final String PHASE_CLUSTER = "original_destination_cluster";
  static final String COORDINATOR_CLUSTER = "coordinator";
  static final String EPP_CLUSTER = "llm-d-epp";
  /** The header by which the EPP names the worker it picked, and the ORIGINAL_DST cluster reads it. */
  static final String DESTINATION = "x-gateway-destination-endpoint";
  static final String PROFILE = "EPP-Profile";
  private static final String LISTENER = "gateway";

  final String release;
  final Placement placement;
  EngineWorker prefill;
  EngineWorker decode;
  /** The hops in front of the workers (null without them): what each engine answered, byte for byte. */
  RecordingHop prefillHop;
  RecordingHop decodeHop;
  ServiceProcess service;
  ChildProcess epp;
  EnvoyProcess envoy;
  ChildProcess coordinator;
  private int gatewayPort;
  private int eppMetricsPort;
  private final List<AutoCloseable> children = new ArrayList<>();

  private LlmdCoordinatorDeployment(String release, Placement placement) {
    this.release = release;
    this.placement = placement;
  }

  /**
   * Starts everything with Envoy {@code release} and the service's filter at {@code placement}; {@code hops}: each worker behind
   * a {@link RecordingHop} (the EPP then names the hops); {@code serviceArgs} besides the shipped settings.
   */
  static LlmdCoordinatorDeployment start(String name, String release, Placement placement, boolean hops, String... serviceArgs) {
    LlmdCoordinatorDeployment d = new LlmdCoordinatorDeployment(release, placement);
    try {
      d.prefill = d.started(RouterDeployment.worker(
          WorkerSpec.of(EngineKind.VLLM, WorkerRole.PREFILL, ShippedBootstrap.LOOPBACK, 0).withModel(Wire.MODEL)));
      d.decode = d.started(RouterDeployment.worker(WorkerSpec.of(EngineKind.VLLM, WorkerRole.DECODE, ShippedBootstrap.LOOPBACK, 0)
          .withModel(Wire.MODEL).withVariant(UsageVariant.BUG).withTokenDelay(Duration.ofMillis(2))));
      int prefillPort = d.prefill.port();
      int decodePort = d.decode.port();
      if (hops) {
        d.prefillHop = d.started(new RecordingHop("http://127.0.0.1:" + prefillPort));
        d.decodeHop = d.started(new RecordingHop("http://127.0.0.1:" + decodePort));
        prefillPort = d.prefillHop.port();
        decodePort = d.decodeHop.port();
      }
      d.startAround(name, prefillPort, decodePort, serviceArgs);
      return d;
    } catch (RuntimeException | AssertionError e) {
      d.close();
      throw e;
    }
  }

  /**
   * The same around the real vLLM pair ({@link RealVllmPair}, shared by the run and left running), each server behind
   * a {@link RecordingHop}; {@link #prefill} and {@link #decode} are null.
   */
  static LlmdCoordinatorDeployment startReal(String name, String release, Placement placement) {
    RealVllmPair pair = RealVllmPair.get();
    LlmdCoordinatorDeployment d = new LlmdCoordinatorDeployment(release, placement);
    try {
      d.prefillHop = d.started(new RecordingHop(pair.prefill.url("")));
      d.decodeHop = d.started(new RecordingHop(pair.decode.url("")));
      d.startAround(name, d.prefillHop.port(), d.decodeHop.port());
      return d;
    } catch (RuntimeException | AssertionError e) {
      d.close();
      throw e;
    }
  }

  /** The service, the EPP over the two worker ports, the gateway Envoy and the coordinator, each waited for. */
  private void startAround(String name, int prefillPort, int decodePort, String... serviceArgs) {
    service = started(ServiceProcess.started(name + "-service", serviceArgs));
    gatewayPort = FreePorts.next();
    int eppPort = FreePorts.next();
    int coordinatorPort = FreePorts.next();
    epp = started(startEpp(name + "-epp", eppPort, prefillPort, decodePort, this));
    int adminPort = FreePorts.next();
    envoy = started(EnvoyProcess.start(name + "-envoy-" + release, release,
        bootstrap(adminPort, gatewayPort, coordinatorPort, eppPort, service.grpcPort(), placement),
        new Topology(adminPort, gatewayPort, gatewayPort, List.of(), List.of(), List.of(service.grpcPort()))));
    envoy.awaitExtProcHealthy(Duration.ofSeconds(30));
    Processes.await("the EPP healthy in Envoy " + release, Duration.ofSeconds(30), this::eppHealthy);
    coordinator = started(startCoordinator(name + "-coordinator", coordinatorPort, gatewayPort));
  }

  /**
   * The EPP: {@code file-discovery} over the two workers, a profile per phase as llm-d-router's coordinator e2e
   * configures its single EPP (role filters, queue scorer, max-score picker, {@code header-profile-handler}); plain
   * gRPC ({@code --secure-serving=false}); every port its own.
   */
  private static ChildProcess startEpp(String name, int grpcPort, int prefillPort, int decodePort, LlmdCoordinatorDeployment d) {
    Path endpoints = write(name + "-endpoints.yaml", """
        endpoints:
        - name: prefill-0
          address: "127.0.0.1"
          port: "%d"
          labels: {llm-d.ai/role: prefill}
        - name: decode-0
          address: "127.0.0.1"
          port: "%d"
          labels: {llm-d.ai/role: decode}
        """.formatted(prefillPort, decodePort));
    Path config = write(name + "-config.yaml", """
        apiVersion: llm-d.ai/v1alpha1
        kind: EndpointPickerConfig
        plugins:
        - name: endpoints
          type: file-discovery
          parameters:
            path: %s
        - type: openai-parser
        - type: prefill-filter
        - type: label-selector-filter
          name: decode-filter
          parameters:
            matchExpressions:
            - key: llm-d.ai/role
              operator: In
              values: ["decode", "prefill-decode", "both"]
        - type: queue-scorer
        - type: max-score-picker
        - type: header-profile-handler
        requestHandler:
          parsers:
          - pluginRef: openai-parser
        schedulingProfiles:
        - name: prefill
          plugins:
          - pluginRef: prefill-filter
          - pluginRef: queue-scorer
            weight: 1
          - pluginRef: max-score-picker
        - name: decode
          plugins:
          - pluginRef: decode-filter
          - pluginRef: queue-scorer
            weight: 1
          - pluginRef: max-score-picker
        dataLayer:
          discovery:
            pluginRef: endpoints
        """.formatted(endpoints));
    d.eppMetricsPort = FreePorts.next();
    ChildProcess epp = new ChildProcess(name, log(name), Duration.ofSeconds(5));
    resetLog(epp.log());
    epp.launch(List.of(Tools.llmdEpp().toString(), "--config-file", config.toString(),
        "--grpc-port", Integer.toString(grpcPort), "--grpc-health-port", Integer.toString(FreePorts.next()),
        "--metrics-port", Integer.toString(d.eppMetricsPort), "--secure-serving=false", "--health-checking",
        "--allow-experimental-plugins", "--tracing=false", "--metrics-endpoint-auth=false", "--enable-pprof=false",
        "--pool-name", "e2e", "--pool-namespace", "e2e"));
    return epp;
  }

  /** The coordinator: its gateway the Envoy listener, the NIXL connector, prefill then decode (no render or encode step). */
  private static ChildProcess startCoordinator(String name, int port, int gatewayPort) {
    Path config = write(name + ".yaml", """
        log_level: 4
        server:
          listen_addr: "127.0.0.1:%d"
          shutdown_timeout: 1s
        gateway:
          address: "http://127.0.0.1:%d"
        pipeline:
          kv_connector: kv-nixl
          use_openai_format: true
          steps:
          - type: prefill
          - type: decode
        """.formatted(port, gatewayPort));
    ChildProcess coordinator = new ChildProcess(name, log(name), Duration.ofSeconds(5));
    resetLog(coordinator.log());
    coordinator.launch(List.of(Tools.llmdCoordinator().toString(), "--config", config.toString()));
    coordinator.await("/readyz", Duration.ofSeconds(30), () -> Http.ok("http://127.0.0.1:" + port + "/readyz"));
    return coordinator;
  }

  /**
   * The gateway's bootstrap: the shipped generation listener's connection manager (its timeouts and access log,
   * plus the requested {@code epp_profile} and {@code x_request_id} fields) with llm-d's two routes and filters, the
   * shipped ext_proc filter and service cluster, and the upstream file's clusters for the coordinator, the EPP and
   * the picked workers. Envoy keeps the coordinator's {@code x-request-id} ({@code preserve_external_request_id},
   * as upstream).
   */
  static ObjectNode bootstrap(int adminPort, int gatewayPort, int coordinatorPort, int eppPort, int servicePort, Placement placement) {
    ObjectNode shipped = ShippedBootstrap.rewrite(Tools.shippedBootstrap(),
        new Topology(adminPort, FreePorts.next(), gatewayPort, List.of(1), List.of(1), List.of(servicePort)));
    ObjectNode resources = (ObjectNode) shipped.path("static_resources");
    ObjectNode listener = ShippedBootstrap.named(resources, "listeners", "generation_egress").deepCopy();
    ObjectNode serviceFilter = ShippedBootstrap.named(listener.at("/filter_chains/0/filters/0/typed_config"), "http_filters",
        FilterConfigs.FILTER_NAME).deepCopy();
    ObjectNode serviceCluster = ShippedBootstrap.named(resources, "clusters", "disagg_usage_extproc").deepCopy();
    listener.put("name", LISTENER);
    ObjectNode manager = (ObjectNode) listener.at("/filter_chains/0/filters/0/typed_config");
    manager.put("stat_prefix", LISTENER);
    manager.put("use_remote_address", true);
    manager.put("preserve_external_request_id", true);
    ObjectNode format = (ObjectNode) manager.at("/access_log/0/typed_config/log_format/text_format_source");
    String line = format.path("inline_string").asText();
    format.put("inline_string", line.substring(0, line.length() - 1)
        + " epp_profile=%REQ(EPP-PROFILE)% x_request_id=%REQ(X-REQUEST-ID)% upstream=%UPSTREAM_HOST%\n");
    manager.set("route_config", yaml("""
        name: gateway
        virtual_hosts:
        - name: gateway
          domains: ["*"]
          routes:
          - match:
              prefix: "/"
              headers:
              - name: EPP-Profile
                present_match: true
            route: {cluster: %s, timeout: 0s}
          - match: {prefix: "/"}
            route: {cluster: %s, timeout: 0s}
            typed_per_filter_config:
              %s:
                "@type": type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExtProcPerRoute
                disabled: true
              %s:
                "@type": type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExtProcPerRoute
                disabled: true
        """.formatted(PHASE_CLUSTER, COORDINATOR_CLUSTER, EPP_FILTER, FilterConfigs.FILTER_NAME)));
    JsonNode eppFilter = yaml("""
        name: %s
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor
          grpc_service:
            envoy_grpc: {cluster_name: %s, authority: localhost}
            timeout: 10s
          processing_mode:
            request_header_mode: SEND
            response_header_mode: SEND
            request_body_mode: FULL_DUPLEX_STREAMED
            response_body_mode: FULL_DUPLEX_STREAMED
            request_trailer_mode: SEND
            response_trailer_mode: SEND
          message_timeout: 1000s
        """.formatted(EPP_FILTER, EPP_CLUSTER));
    ArrayNode filters = manager.putArray("http_filters");
    switch (placement) {
      case EPP_FIRST -> filters.add(eppFilter).add(serviceFilter);
      case SERVICE_FIRST -> filters.add(serviceFilter).add(eppFilter);
      case EPP_ALONE, SERVICE_ON_CLUSTER -> filters.add(eppFilter);
    }
    filters.add(yaml("""
        name: envoy.filters.http.router
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
          suppress_envoy_headers: true
        """));
    resources.putArray("listeners").add(listener);
    ArrayNode clusters = resources.putArray("clusters");
    clusters.add(serviceCluster);
    ObjectNode phaseCluster = (ObjectNode) yaml("""
        name: %s
        type: ORIGINAL_DST
        connect_timeout: 1s
        lb_policy: CLUSTER_PROVIDED
        original_dst_lb_config:
          use_http_header: true
          http_header_name: %s
        """.formatted(PHASE_CLUSTER, DESTINATION));
    if (placement == Placement.SERVICE_ON_CLUSTER) {
      ObjectNode options = (ObjectNode) yaml("""
          envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
            "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
            explicit_http_config: {http_protocol_options: {}}
            http_filters:
            - name: envoy.filters.http.upstream_codec
              typed_config:
                "@type": type.googleapis.com/envoy.extensions.filters.http.upstream_codec.v3.UpstreamCodec
          """);
      ((ArrayNode) options.at("/envoy.extensions.upstreams.http.v3.HttpProtocolOptions/http_filters")).insert(0, serviceFilter);
      phaseCluster.set("typed_extension_protocol_options", options);
    }
    clusters.add(phaseCluster);
    clusters.add(yaml("""
        name: %s
        type: STATIC
        connect_timeout: 1s
        load_assignment:
          cluster_name: %s
          endpoints:
          - lb_endpoints:
            - endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: %d}}}
        """.formatted(COORDINATOR_CLUSTER, COORDINATOR_CLUSTER, coordinatorPort)));
    clusters.add(yaml("""
        name: %s
        type: STATIC
        connect_timeout: 1s
        typed_extension_protocol_options:
          envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
            "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
            explicit_http_config: {http2_protocol_options: {}}
        health_checks:
        - timeout: 2s
          interval: 2s
          no_traffic_interval: 1s
          unhealthy_interval: 1s
          unhealthy_threshold: 2
          healthy_threshold: 1
          grpc_health_check: {service_name: envoy.service.ext_proc.v3.ExternalProcessor}
        load_assignment:
          cluster_name: %s
          endpoints:
          - lb_endpoints:
            - endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: %d}}}
        """.formatted(EPP_CLUSTER, EPP_CLUSTER, eppPort)));
    return shipped;
  }

  /**
   * Whether Envoy {@code release} keeps response bodies with the EPP (FULL_DUPLEX_STREAMED) and the service in one
   * filter chain: 1.40 and later. Before, about one flow in ten lost its prefill's or its decode's answer here (the
   * coordinator answers 502, or the client gets a 200 with no body), in either order, and none with the EPP alone or
   * the service on the cluster ({@code LlmdCoordinatorTest.twoExtProcFiltersInOneChainLoseAnswersBeforeEnvoy140}).
   */
  static boolean keepsBodiesInOneChain(String release) {
    String[] parts = release.split("\\.");
    int major = Integer.parseInt(parts[0]);
    int minor = Integer.parseInt(parts[1]);
    return major > 1 || minor >= 40;
  }

  /** The placements of the service that keep every answer with Envoy {@code release}. */
  static List<Placement> placements(String release) {
    return keepsBodiesInOneChain(release)
        ? List.of(Placement.EPP_FIRST, Placement.SERVICE_FIRST, Placement.SERVICE_ON_CLUSTER)
        : List.of(Placement.SERVICE_ON_CLUSTER);
  }

  /** The placement a user adding the service to llm-d's gateway gets with Envoy {@code release}: after the EPP where that works. */
  static Placement natural(String release) {
    return keepsBodiesInOneChain(release) ? Placement.EPP_FIRST : Placement.SERVICE_ON_CLUSTER;
  }

  /** Envoy's active gRPC health check of the EPP passed. */
  boolean eppHealthy() {
    for (String line : Http.body(envoy.adminUrl("/clusters")).split("\n")) {
      if (line.startsWith(EPP_CLUSTER + "::") && line.contains("::health_flags::")) {
        return line.endsWith("::healthy");
      }
    }
    return false;
  }

  /** A URL on the gateway listener, where clients send their requests. */
  String url(String path) {
    return "http://127.0.0.1:" + gatewayPort + path;
  }

  /** The EPP's Prometheus text. */
  String eppMetrics() {
    return Http.body("http://127.0.0.1:" + eppMetricsPort + "/metrics");
  }

  /** The gateway's access-log lines of the decode legs (the coordinator's {@code EPP-Profile: decode} calls), in order. */
  List<AccessLogLine> decodeLegs() {
    return phaseLegs("decode");
  }

  /** The gateway's access-log lines of the {@code profile} legs. */
  List<AccessLogLine> phaseLegs(String profile) {
    return envoy.accessLog().stream()
        .filter(l -> l.path().startsWith("/v1/chat/completions") && profile.equals(l.field("epp_profile")))
        .toList();
  }

  /** Waits until {@code count} decode legs are logged and the service counted as many generation exchanges. */
  void awaitGenerations(int count) {
    Processes.await(count + " decode legs logged and counted", Duration.ofSeconds(10),
        () -> decodeLegs().size() >= count && ServiceMetrics.generationExchanges(service) >= count);
  }

  /**
   * Envoy's non-zero fail-open and discarded-reply counters of both ext_proc filters ({@link EnvoyCounters#FAILURES}),
   * on the listener and on the phase cluster (an upstream filter counts there).
   */
  Map<String, Long> extProcFailures() {
    Map<String, Long> failures = new java.util.TreeMap<>();
    envoy.stats("").forEach((name, value) -> {
      int at = name.indexOf(".ext_proc.");
      if (value != 0 && at >= 0 && EnvoyCounters.FAILURES.contains(name.substring(at + ".ext_proc.".length()))) {
        failures.put(name, value);
      }
    });
    return failures;
  }

  private <T extends AutoCloseable> T started(T child) {
    children.add(0, child);
    return child;
  }

  private static JsonNode yaml(String text) {
    try {
      return ShippedBootstrap.YAML.readTree(text);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static Path log(String name) {
    return Tools.logs().resolve(name + ".log");
  }

  private static void resetLog(Path log) {
    try {
      Files.deleteIfExists(log);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static Path write(String file, String text) {
    Path path = Tools.logs().resolve(file);
    try {
      Files.writeString(path, text);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return path;
  }

  @Override
  public void close() {
    RouterDeployment.closeAll(children);
  }
}
