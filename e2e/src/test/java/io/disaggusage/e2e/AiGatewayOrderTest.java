package io.disaggusage.e2e;

import io.disaggusage.extproc.testkit.AccessLogLine;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.disaggusage.extproc.testkit.ChildProcess;
import io.disaggusage.extproc.testkit.FreePorts;
import io.disaggusage.extproc.testkit.InstalledTools;
import io.disaggusage.extproc.testkit.ShippedBootstrap;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Envoy AI Gateway's extproc (a peer, not in the required suite: its Go module is not on the module
 * proxy, so CI cannot build it) beside the service on the generation listener of the shipped bootstrap,
 * wired as AI Gateway's own data-plane test wires it — a router-level ext_proc (bodies BUFFERED) and,
 * in the worker cluster, its upstream ext_proc, a content-length header mutation and the upstream codec.
 * Listed before the service's ext_proc filter it meters the corrected cached count (its
 * {@code io.envoy.ai_gateway} metadata and {@code gen_ai_client_token_usage{gen_ai_token_type="cached_input"}});
 * listed after it, the worker's raw count. The client gets the corrected body either way.
 *
 * <p>Run it with a binary built from envoyproxy/ai-gateway ({@code go build ./cmd/extproc}, v1.1.0):
 * {@code AIGW_EXTPROC=/path/to/extproc mvn -B -pl e2e -am verify -De2e.excludedGroups= -Dtest=AiGatewayOrderTest
 * -Dsurefire.failIfNoSpecifiedTests=false}. The build leaves it out otherwise (tag {@code peer}); run
 * without {@code AIGW_EXTPROC} it prints a notice and is skipped.
 */
@Tag("peer")
class AiGatewayOrderTest {
  static final String RELEASE = "1.40.0";
  static final String AIGW_FILTER = "aigateway_extproc";
  static final String BACKEND = "vllm";
  static final Pattern CACHED_SUM = Pattern.compile(
      "(?m)^gen_ai_client_token_usage_sum\\{[^}]*gen_ai_token_type=\"cached_input\"[^}]*\\} ([0-9.eE+]+)");

  static Path binary;

  @BeforeAll
  static void binary() {
    String given = System.getenv("AIGW_EXTPROC");
    if (given == null || given.isBlank()) {
      System.out.println("NOTICE: AiGatewayOrderTest not run: set AIGW_EXTPROC to an Envoy AI Gateway extproc binary"
          + " (go build ./cmd/extproc in a checkout of github.com/envoyproxy/ai-gateway v1.1.0)");
    }
    Assumptions.assumeTrue(given != null && !given.isBlank(), "AIGW_EXTPROC is not set");
    binary = Path.of(given);
    assertThat(binary).as("AIGW_EXTPROC").isExecutable();
  }

  @ParameterizedTest(name = "AI Gateway {0} the service's filter, stream={1}")
  @CsvSource({"before, false", "before, true", "after, false", "after, true"})
  void aiGatewayMetersWhatPassesItsPlaceInTheChain(String place, boolean stream) throws Exception {
    try (AiGatewayProcess aigw = AiGatewayProcess.started("aigw-" + place + "-" + stream);
        Stack stack = Stack.start("aigw-" + place + "-" + stream, RELEASE, 1, InstalledTools.serviceCommand(),
            topology -> withAiGateway(ShippedBootstrap.rewrite(Tools.shippedBootstrap(), topology), aigw.port(),
                place.equals("before")))) {
      stack.context.answer(VllmWorkers::prefill);
      stack.generation.answer(VllmWorkers::decode);
      String body = VllmFlow.chatPair(stack, "aigw-" + place + "-" + stream, stream);
      assertThat(body).as("what the client reads").contains("\"cached_tokens\":" + VllmWorkers.CACHED);

      long expected = place.equals("before") ? VllmWorkers.CACHED : VllmWorkers.PROMPT;
      Processes.await("AI Gateway's cached_input sum", Duration.ofSeconds(10), () -> aigw.cachedInputSum() > 0);
      assertThat(aigw.cachedInputSum()).as("AI Gateway's gen_ai_client_token_usage cached_input, listed %s", place)
          .isEqualTo(expected);
      Processes.await("the generation leg's access log line", Duration.ofSeconds(5),
          () -> !stack.envoy.accessLog("generation").isEmpty());
      AccessLogLine line = stack.envoy.accessLog("generation").get(0);
      assertThat(line.field("aigw_cached_input_tokens")).as("%s", line).isEqualTo("" + expected);
      assertThat(line.field("cached_tokens")).as("the service's own metadata").isEqualTo("" + VllmWorkers.CACHED);
    }
  }

  /**
   * The shipped bootstrap with AI Gateway on the generation listener ({@code before} or after the
   * service's ext_proc filter), its upstream filters in the generation cluster, its cluster, and its
   * cached count in the access log.
   */
  static ObjectNode withAiGateway(ObjectNode bootstrap, int aigwPort, boolean before) {
    ObjectNode listener = ShippedBootstrap.named(bootstrap.path("static_resources"), "listeners", "generation_egress");
    ObjectNode hcm = (ObjectNode) listener.at("/filter_chains/0/filters/0/typed_config");
    ArrayNode filters = ShippedBootstrap.httpFilters(bootstrap, "generation_egress");
    int ours = ShippedBootstrap.indexOf(filters, "envoy.filters.http.ext_proc");
    filters.insert(before ? ours : ours + 1, ShippedBootstrap.YAML.valueToTree(Map.of(
        "name", AIGW_FILTER,
        "typed_config", Map.of(
            "@type", "type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor",
            "allow_mode_override", true,
            "processing_mode", Map.of("request_header_mode", "SEND", "request_body_mode", "BUFFERED",
                "response_header_mode", "SEND", "response_body_mode", "BUFFERED"),
            "grpc_service", Map.of("envoy_grpc", Map.of("cluster_name", "aigw_extproc"), "timeout", "30s"),
            "message_timeout", "60s",
            "metadata_options", Map.of("receiving_namespaces", Map.of("untyped", List.of("io.envoy.ai_gateway")))))));
    ObjectNode format = (ObjectNode) hcm.at("/access_log/0/typed_config/log_format/text_format_source");
    format.put("inline_string", format.path("inline_string").asText().replace("\n",
        " aigw_cached_input_tokens=%DYNAMIC_METADATA(io.envoy.ai_gateway:cached_input_tokens)%\n"));

    ArrayNode clusters = (ArrayNode) bootstrap.at("/static_resources/clusters");
    ObjectNode generation = ShippedBootstrap.named(bootstrap.path("static_resources"), "clusters", "generation");
    assertThat(generation.has("typed_extension_protocol_options")).as("the generation cluster's own options").isFalse();
    generation.set("typed_extension_protocol_options", ShippedBootstrap.YAML.valueToTree(Map.of(
        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions", Map.of(
            "@type", "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
            "explicit_http_config", Map.of("http_protocol_options", Map.of()),
            "http_filters", List.of(
                Map.of("name", "aigateway_upstream_extproc", "typed_config", Map.of(
                    "@type", "type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor",
                    "allow_mode_override", true,
                    "request_attributes", List.of(
                        "xds.upstream_host_metadata.filter_metadata['aigateway.envoy.io']['per_route_rule_backend_name']"),
                    "processing_mode", Map.of("request_header_mode", "SEND", "request_body_mode", "NONE",
                        "response_header_mode", "SKIP", "response_body_mode", "NONE"),
                    "grpc_service", Map.of("envoy_grpc", Map.of("cluster_name", "aigw_extproc"), "timeout", "30s"),
                    "message_timeout", "60s",
                    "metadata_options", Map.of("receiving_namespaces", Map.of("untyped", List.of("io.envoy.ai_gateway"))))),
                Map.of("name", "envoy.filters.http.header_mutation", "typed_config", Map.of(
                    "@type", "type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutation",
                    "mutations", Map.of("request_mutations", List.of(Map.of("append", Map.of(
                        "append_action", "ADD_IF_ABSENT",
                        "header", Map.of("key", "content-length",
                            "value", "%DYNAMIC_METADATA(io.envoy.ai_gateway:content_length)%"))))))),
                Map.of("name", "envoy.filters.http.upstream_codec", "typed_config", Map.of(
                    "@type", "type.googleapis.com/envoy.extensions.filters.http.upstream_codec.v3.UpstreamCodec")))))));
    for (JsonNode endpoints : generation.at("/load_assignment/endpoints")) {
      for (JsonNode endpoint : endpoints.path("lb_endpoints")) {
        ((ObjectNode) endpoint).set("metadata", ShippedBootstrap.YAML.valueToTree(Map.of(
            "filter_metadata", Map.of("aigateway.envoy.io", Map.of("per_route_rule_backend_name", BACKEND)))));
      }
    }
    clusters.add(ShippedBootstrap.YAML.valueToTree(Map.of(
        "name", "aigw_extproc",
        "type", "STATIC",
        "connect_timeout", "1s",
        "typed_extension_protocol_options", Map.of("envoy.extensions.upstreams.http.v3.HttpProtocolOptions", Map.of(
            "@type", "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
            "explicit_http_config", Map.of("http2_protocol_options", Map.of()))),
        "load_assignment", Map.of("cluster_name", "aigw_extproc", "endpoints", List.of(Map.of("lb_endpoints", List.of(
            Map.of("endpoint", Map.of("address", Map.of("socket_address",
                Map.of("address", ShippedBootstrap.LOOPBACK, "port_value", aigwPort)))))))))));
    return bootstrap;
  }

  /** AI Gateway's extproc with the minimal OpenAI pass-through config that meters tokens. */
  static final class AiGatewayProcess extends ChildProcess {
    private final int port = FreePorts.next();
    private final int adminPort = FreePorts.next();

    private AiGatewayProcess(String name, Path log) {
      super(name, log, Duration.ofSeconds(5));
    }

    static AiGatewayProcess started(String name) {
      Path config = Tools.logs().resolve(name + ".aigw.yaml");
      Path log = Tools.logs().resolve(name + ".aigw.log");
      AiGatewayProcess aigw = new AiGatewayProcess("AI Gateway's extproc " + name, log);
      try {
        Files.deleteIfExists(log);
        Files.writeString(config, String.join("\n",
            "version: dev", // a build without release ldflags says dev, and wants its config to
            "globalLLMRequestCosts:",
            "- {metadataKey: input_tokens, type: InputToken}",
            "- {metadataKey: cached_input_tokens, type: CachedInputToken}",
            "- {metadataKey: output_tokens, type: OutputToken}",
            "- {metadataKey: total_tokens, type: TotalToken}",
            "backends:",
            "- {name: " + BACKEND + ", schema: {name: OpenAI, prefix: v1}}",
            ""));
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
      aigw.launch(List.of(binary.toString(), "-configPath", config.toString(),
          "-extProcAddr", "127.0.0.1:" + aigw.port, "-adminPort", Integer.toString(aigw.adminPort)),
          Map.of("DISABLE_PPROF", "1"));
      aigw.await("admin /metrics", Duration.ofSeconds(20), () -> Http.ok("http://127.0.0.1:" + aigw.adminPort + "/metrics"));
      return aigw;
    }

    int port() {
      return port;
    }

    /** Its {@code gen_ai_client_token_usage_sum} for {@code cached_input}, summed over its series; 0 before any. */
    long cachedInputSum() {
      Matcher m = CACHED_SUM.matcher(Http.body("http://127.0.0.1:" + adminPort + "/metrics"));
      double sum = 0;
      while (m.find()) {
        sum += Double.parseDouble(m.group(1));
      }
      return (long) sum;
    }
  }
}
