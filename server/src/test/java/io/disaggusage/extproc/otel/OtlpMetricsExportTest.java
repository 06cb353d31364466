package io.disaggusage.extproc.otel;

import static org.assertj.core.api.Assertions.assertThat;

import com.sun.net.httpserver.HttpServer;
import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.exchange.Outcome;
import io.disaggusage.extproc.exchange.Phase;
import io.disaggusage.extproc.usage.UsageFigures;
import io.opentelemetry.proto.collector.metrics.v1.ExportMetricsServiceRequest;
import io.opentelemetry.proto.common.v1.KeyValue;
import io.opentelemetry.proto.metrics.v1.HistogramDataPoint;
import io.opentelemetry.proto.metrics.v1.Metric;
import io.opentelemetry.proto.metrics.v1.ResourceMetrics;
import java.io.IOException;
import java.math.BigInteger;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * What the OTLP export puts on the wire, decoded with the OpenTelemetry protos from a loopback HTTP
 * receiver: the path, the headers, the resource, {@code gen_ai.client.token.usage} by token type with
 * the model and outcome, the exchange counter, and the final push at close. (e2e OtlpCollectorTest
 * sends the same to a real OpenTelemetry Collector.)
 */
class OtlpMetricsExportTest {
  private HttpServer receiver;
  private final List<ExportMetricsServiceRequest> received = new CopyOnWriteArrayList<>();
  private final List<String> paths = new CopyOnWriteArrayList<>();
  private final List<String> tenants = new CopyOnWriteArrayList<>();
  private final List<Throwable> problems = new CopyOnWriteArrayList<>();

  @BeforeEach
  void startReceiver() throws IOException {
    receiver = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    receiver.createContext("/", exchange -> {
      try {
        paths.add(exchange.getRequestURI().getPath());
        tenants.add(String.valueOf(exchange.getRequestHeaders().getFirst("X-Tenant")));
        received.add(ExportMetricsServiceRequest.parseFrom(exchange.getRequestBody().readAllBytes()));
        exchange.sendResponseHeaders(200, -1);
      } catch (RuntimeException | Error e) {
        problems.add(e);
        exchange.sendResponseHeaders(400, -1);
      } finally {
        exchange.close();
      }
    });
    receiver.start();
  }

  @AfterEach
  void stopReceiver() {
    receiver.stop(0);
  }

  private Config.Otlp config() {
    return new Config.Otlp("http://127.0.0.1:" + receiver.getAddress().getPort() + "/", Duration.ofHours(1),
        Duration.ofSeconds(5), List.of("X-Tenant = team-a"));
  }

  @Test
  void pushesTheTokenUsageByTypeModelAndOutcomeAndTheExchangesAtClose() {
    try (OtlpMetricsExport export = OtlpMetricsExport.start(config())) {
      export.exchange(Phase.CONTEXT, Outcome.STORED);
      export.exchange(Phase.GENERATION, Outcome.REWRITTEN);
      export.generation("llama", figures(101, 7, 13, 101), Outcome.REWRITTEN);
      export.generation("llama", figures(50, 0, 5, 49), Outcome.REWRITTEN);
    } // the interval is an hour: what arrived came with the final push at close

    assertThat(problems).as("what the receiver could not decode").isEmpty();
    assertThat(paths).containsExactly("/v1/metrics");
    assertThat(tenants).containsExactly("team-a");
    ResourceMetrics resource = received.get(0).getResourceMetrics(0);
    Map<String, String> resourceAttributes = strings(resource.getResource().getAttributesList());
    assertThat(resourceAttributes).containsEntry("service.name", "disagg-usage-extproc").containsKeys("service.version",
        "service.instance.id");

    List<Metric> metrics = resource.getScopeMetricsList().stream().flatMap(s -> s.getMetricsList().stream()).toList();
    Metric usage = metrics.stream().filter(m -> m.getName().equals("gen_ai.client.token.usage")).findFirst().orElseThrow();
    assertThat(usage.getUnit()).isEqualTo("{token}");
    Map<String, Double> sums = new TreeMap<>();
    for (HistogramDataPoint point : usage.getHistogram().getDataPointsList()) {
      Map<String, String> attributes = strings(point.getAttributesList());
      assertThat(attributes).containsEntry("gen_ai.request.model", "llama").containsEntry("disagg_usage.outcome", "rewritten");
      sums.put(attributes.get("gen_ai.token.type"), point.getSum());
      assertThat(point.getCount()).isEqualTo(2);
      assertThat(point.getExplicitBoundsList()).startsWith(1.0, 4.0, 16.0);
    }
    assertThat(sums).containsExactlyInAnyOrderEntriesOf(Map.of(
        "input", 151.0, "cached_input", 7.0, "output", 18.0, "disagg_usage.reported_cached_input", 150.0));

    Metric exchanges = metrics.stream().filter(m -> m.getName().equals("disagg_usage.exchanges")).findFirst().orElseThrow();
    assertThat(exchanges.getSum().getIsMonotonic()).isTrue();
    assertThat(exchanges.getSum().getDataPointsList().stream()
        .collect(Collectors.toMap(p -> strings(p.getAttributesList()).get("disagg_usage.phase"), p -> p.getAsInt())))
        .containsExactlyInAnyOrderEntriesOf(Map.of("context", 1L, "generation", 1L));
  }

  @Test
  void aMissingCountIsNotRecordedAndAnUnreachableCollectorCostsNothingButTheClose() {
    Config.Otlp nowhere = new Config.Otlp("http://127.0.0.1:1", Duration.ofHours(1), Duration.ofMillis(200), List.of());
    long begin = System.nanoTime();
    try (OtlpMetricsExport export = OtlpMetricsExport.start(nowhere)) {
      export.generation("m", new UsageFigures(BigInteger.TEN, null, BigInteger.ONE, null, null), Outcome.REWRITTEN);
    }
    assertThat(Duration.ofNanos(System.nanoTime() - begin)).isLessThan(Duration.ofSeconds(5));
  }

  @Test
  void theMetricsUrlIsTheBaseUrlPlusV1Metrics() {
    assertThat(OtlpMetricsExport.metricsUrl("http://c:4318")).isEqualTo("http://c:4318/v1/metrics");
    assertThat(OtlpMetricsExport.metricsUrl("http://c:4318/")).isEqualTo("http://c:4318/v1/metrics");
    assertThat(OtlpMetricsExport.metricsUrl("https://c/otlp/v1/metrics")).isEqualTo("https://c/otlp/v1/metrics");
  }

  private static UsageFigures figures(long prompt, long cached, long completion, long reportedCached) {
    return new UsageFigures(BigInteger.valueOf(prompt), BigInteger.valueOf(cached), BigInteger.valueOf(completion),
        BigInteger.valueOf(prompt + completion), BigInteger.valueOf(reportedCached));
  }

  private static Map<String, String> strings(List<KeyValue> attributes) {
    Map<String, String> out = new TreeMap<>();
    attributes.forEach(kv -> out.put(kv.getKey(), kv.getValue().getStringValue()));
    return out;
  }
}
