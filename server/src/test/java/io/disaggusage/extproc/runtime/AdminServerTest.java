package io.disaggusage.extproc.runtime;

import static org.assertj.core.api.Assertions.assertThat;

import io.disaggusage.extproc.metrics.Metrics;
import io.prometheus.metrics.core.metrics.GaugeWithCallback;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

class AdminServerTest {
  private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
  private AdminServer server;

  @AfterEach
  void stop() {
    if (server != null) {
      server.close();
    }
  }

  private HttpResponse<String> send(String method, String path, String... headers) throws Exception {
    HttpRequest.Builder request =
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + server.port() + path))
            .timeout(Duration.ofSeconds(5))
            .method(method, HttpRequest.BodyPublishers.noBody());
    if (headers.length > 0) {
      request.headers(headers);
    }
    return http.send(request.build(), HttpResponse.BodyHandlers.ofString());
  }

  @Test
  void readinessFollowsTheSupplierAndGivesTheReason() throws Exception {
    AtomicReference<Optional<String>> reason = new AtomicReference<>(Optional.of("store reconnecting"));
    server = AdminServer.start(0, new PrometheusRegistry(), reason::get);

    HttpResponse<String> notReady = send("GET", "/readyz");
    assertThat(notReady.statusCode()).isEqualTo(503);
    assertThat(notReady.body()).isEqualTo("not ready: store reconnecting\n");
    assertThat(send("GET", "/healthz").statusCode()).isEqualTo(200);

    reason.set(Optional.empty());
    HttpResponse<String> ready = send("GET", "/readyz");
    assertThat(ready.statusCode()).isEqualTo(200);
    assertThat(ready.body()).isEqualTo("ready\n");
    assertThat(ready.headers().firstValue("Cache-Control")).hasValue("no-store");
  }

  @Test
  void headAnswersWithoutBody() throws Exception {
    server = AdminServer.start(0, Metrics.standalone().registry(), Optional::empty);

    HttpResponse<String> head = send("HEAD", "/metrics");
    assertThat(head.statusCode()).isEqualTo(200);
    assertThat(head.body()).isEmpty();
    assertThat(send("DELETE", "/readyz").statusCode()).isEqualTo(405);
    assertThat(send("DELETE", "/readyz").headers().firstValue("Allow")).hasValue("GET, HEAD");
  }

  @Test
  void metricsFormatFollowsTheAcceptHeader() throws Exception {
    Metrics metrics = Metrics.standalone();
    metrics.streamOpened();
    server = AdminServer.start(0, metrics.registry(), Optional::empty);

    HttpResponse<String> text = send("GET", "/metrics");
    assertThat(text.headers().firstValue("Content-Type")).hasValue("text/plain; version=0.0.4; charset=utf-8");
    assertThat(text.body()).contains("disagg_usage_active_streams 1.0").doesNotContain("# EOF");

    HttpResponse<String> openMetrics =
        send("GET", "/metrics", "Accept", "application/openmetrics-text; version=1.0.0; charset=utf-8");
    assertThat(openMetrics.headers().firstValue("Content-Type"))
        .hasValueSatisfying(v -> assertThat(v).startsWith("application/openmetrics-text; version=1.0.0"));
    assertThat(openMetrics.body()).contains("disagg_usage_active_streams 1.0").endsWith("# EOF\n");
  }

  @Test
  void failingCollectorGives500AndTheServerKeepsServing() throws Exception {
    PrometheusRegistry registry = new PrometheusRegistry();
    GaugeWithCallback.builder()
        .name("broken")
        .help("always fails")
        .callback(
            cb -> {
              throw new IllegalStateException("collector failed");
            })
        .register(registry);
    server = AdminServer.start(0, registry, Optional::empty);

    assertThat(send("GET", "/metrics").statusCode()).isEqualTo(500);
    assertThat(send("GET", "/healthz").statusCode()).isEqualTo(200);
  }
}
