package io.disaggusage.extproc.runtime;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.disaggusage.extproc.config.Config;
import io.disaggusage.extproc.config.ConfigLoader;
import io.disaggusage.extproc.config.ConfigLoader.Setting;
import io.disaggusage.extproc.store.RedisContextUsageStore;
import io.disaggusage.extproc.store.RedisServer;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.health.v1.HealthCheckRequest;
import io.grpc.health.v1.HealthCheckResponse.ServingStatus;
import io.grpc.health.v1.HealthGrpc;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.reflection.v1.ServerReflectionGrpc;
import io.grpc.reflection.v1.ServerReflectionRequest;
import io.grpc.reflection.v1.ServerReflectionResponse;
import io.grpc.reflection.v1.ServiceResponse;
import io.grpc.stub.StreamObserver;
import java.io.IOException;
import java.net.ConnectException;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

class ServerRuntimeTest {
  private static final String EXT_PROC = "envoy.service.ext_proc.v3.ExternalProcessor";

  private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
  private ServerRuntime runtime;
  private ManagedChannel channel;

  @AfterEach
  void tearDown() throws InterruptedException {
    RuntimeTeardown.close(channel == null ? List.of() : List.of(channel), runtime);
  }

  /** Ports 0 plus {@code key=value} settings. */
  static Config config(String... settings) throws Exception {
    List<Setting> all = new ArrayList<>();
    all.add(new Setting("grpc.port", "0", "test"));
    all.add(new Setting("admin.port", "0", "test"));
    for (String setting : settings) {
      int eq = setting.indexOf('=');
      all.add(new Setting(setting.substring(0, eq), setting.substring(eq + 1), "test"));
    }
    return ConfigLoader.load(null, Map.of(), all);
  }

  private ServerRuntime start(String... settings) throws Exception {
    runtime = ServerRuntime.start(config(settings));
    channel = NettyChannelBuilder.forAddress("127.0.0.1", runtime.grpcPort()).usePlaintext().build();
    return runtime;
  }

  private HealthGrpc.HealthBlockingStub health() {
    return HealthGrpc.newBlockingStub(channel).withDeadlineAfter(5, TimeUnit.SECONDS);
  }

  private static HealthCheckRequest service(String name) {
    return HealthCheckRequest.newBuilder().setService(name).build();
  }

  private HttpResponse<String> get(String path, String... headers) throws IOException, InterruptedException {
    HttpRequest.Builder request =
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + runtime.adminPort() + path))
            .timeout(Duration.ofSeconds(5));
    if (headers.length > 0) {
      request.headers(headers);
    }
    return http.send(request.build(), HttpResponse.BodyHandlers.ofString());
  }

  @Test
  void servesHealthReflectionAndAdminEndpointsThenStopsCleanly() throws Exception {
    long begin = System.nanoTime();
    start();
    long wallMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - begin);
    System.out.printf(
        "ServerRuntime.start: %d ms (runtime's own measure %d ms)%n", wallMillis, runtime.startupTime().toMillis());
    assertThat(runtime.startupTime()).isLessThan(Duration.ofSeconds(10));
    assertThat(runtime.grpcPort()).isPositive();
    assertThat(runtime.adminPort()).isPositive().isNotEqualTo(runtime.grpcPort());

    // gRPC health over a real Netty connection, for both names Envoy and Kubernetes use.
    assertThat(health().check(service("")).getStatus()).isEqualTo(ServingStatus.SERVING);
    assertThat(health().check(service(EXT_PROC)).getStatus()).isEqualTo(ServingStatus.SERVING);
    assertThatThrownBy(() -> health().check(service("no.such.Service")))
        .isInstanceOfSatisfying(
            StatusRuntimeException.class, e -> assertThat(e.getStatus().getCode()).isEqualTo(Status.Code.NOT_FOUND));

    // The ext_proc service is registered (listed by server reflection).
    assertThat(listServices()).contains(EXT_PROC, "grpc.health.v1.Health");

    HttpResponse<String> healthz = get("/healthz");
    assertThat(healthz.statusCode()).isEqualTo(200);
    assertThat(healthz.body()).isEqualTo("ok\n");

    HttpResponse<String> readyz = get("/readyz");
    assertThat(readyz.statusCode()).isEqualTo(200);
    assertThat(readyz.body()).isEqualTo("ready\n");
    assertThat(runtime.isReady()).isTrue();

    HttpResponse<String> metrics = get("/metrics");
    assertThat(metrics.statusCode()).isEqualTo(200);
    assertThat(metrics.headers().firstValue("Content-Type")).hasValueSatisfying(v -> assertThat(v).startsWith("text/plain"));
    assertThat(metrics.body())
        .contains("# TYPE disagg_usage_active_streams gauge")
        .contains("disagg_usage_active_streams 0")
        .contains("disagg_usage_store_entries 0")
        // the start-up warm-up's exchanges went to a private service with metrics of its own: every
        // series is there from start-up, at 0
        .contains("disagg_usage_exchanges_total{outcome=\"rewritten\",phase=\"generation\"} 0")
        .doesNotContainPattern("disagg_usage_exchanges_total\\{[^}]*\\} [1-9]")
        .contains("disagg_usage_build_info{")
        .contains("jvm_memory_used_bytes")
        .contains("jvm_threads_current");

    HttpResponse<String> openMetrics = get("/metrics", "Accept", "application/openmetrics-text; version=1.0.0");
    assertThat(openMetrics.statusCode()).isEqualTo(200);
    assertThat(openMetrics.headers().firstValue("Content-Type"))
        .hasValueSatisfying(v -> assertThat(v).startsWith("application/openmetrics-text"));
    assertThat(openMetrics.body()).contains("disagg_usage_active_streams").endsWith("# EOF\n");

    assertThat(get("/nope").statusCode()).isEqualTo(404);
    assertThat(get("/healthz/extra").statusCode()).isEqualTo(404);
    HttpResponse<String> post =
        http.send(
            HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + runtime.adminPort() + "/healthz"))
                .POST(HttpRequest.BodyPublishers.ofString("x"))
                .build(),
            HttpResponse.BodyHandlers.ofString());
    assertThat(post.statusCode()).isEqualTo(405);

    // The timer handed to the store and the ext_proc service: one daemon thread with a fixed name.
    Thread timerThread = runtime.timer().submit(Thread::currentThread).get(5, TimeUnit.SECONDS);
    assertThat(timerThread.getName()).isEqualTo("disagg-usage-timer");
    assertThat(timerThread.isDaemon()).isTrue();

    int adminPort = runtime.adminPort();
    long closeBegin = System.nanoTime();
    runtime.close();
    System.out.printf("ServerRuntime.close: %d ms%n", TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - closeBegin));

    assertThat(runtime.isTerminated()).isTrue();
    assertThat(runtime.isReady()).isFalse();
    assertThat(runtime.timer().isShutdown()).isTrue();
    assertThatThrownBy(
            () ->
                http.send(
                    HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + adminPort + "/healthz")).build(),
                    HttpResponse.BodyHandlers.ofString()))
        .isInstanceOf(ConnectException.class);
    assertThatThrownBy(() -> health().check(service("")))
        .isInstanceOfSatisfying(
            StatusRuntimeException.class,
            e -> assertThat(e.getStatus().getCode()).isEqualTo(Status.Code.UNAVAILABLE));
    runtime.close(); // idempotent
  }

  @Test
  void maxInboundMessageSizeComesFromTheConfig() throws Exception {
    start("grpc.max_inbound_message_bytes=1KiB");

    // Under the limit the request reaches the health service (which does not know the name) ...
    assertThatThrownBy(() -> health().check(service("x".repeat(512))))
        .isInstanceOfSatisfying(
            StatusRuntimeException.class, e -> assertThat(e.getStatus().getCode()).isEqualTo(Status.Code.NOT_FOUND));
    // ... over it the transport rejects it before any service sees it.
    assertThatThrownBy(() -> health().check(service("x".repeat(2048))))
        .isInstanceOfSatisfying(
            StatusRuntimeException.class,
            e -> assertThat(e.getStatus().getCode()).isEqualTo(Status.Code.RESOURCE_EXHAUSTED));
  }

  @Test
  void shutdownAnnouncesNotServingAndWaitsForInFlightStreams() throws Exception {
    start();
    CompletableFuture<Integer> readyzWhileDraining = new CompletableFuture<>();
    // This in-flight stream finishes on its own, well within the grace period: on NOT_SERVING the
    // prober asks /readyz (still draining: the admin server answers, and is not ready), then hangs up.
    HealthWatch watch =
        HealthWatch.untilNotServing(
            channel,
            "",
            () -> {
              try {
                readyzWhileDraining.complete(get("/readyz").statusCode());
              } catch (IOException | InterruptedException e) {
                readyzWhileDraining.completeExceptionally(e);
              }
            });
    watch.await(ServingStatus.SERVING, Duration.ofSeconds(5));

    long begin = System.nanoTime();
    runtime.close();
    long closeMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - begin);

    assertThat(watch.seen()).containsExactly(ServingStatus.SERVING, ServingStatus.NOT_SERVING);
    assertThat(readyzWhileDraining.get(5, TimeUnit.SECONDS)).isEqualTo(503);
    watch.ended().get(5, TimeUnit.SECONDS);
    assertThat(closeMillis).isLessThan(runtime.config().shutdown().drainTimeout().toMillis());
  }

  @Test
  void shutdownCancelsStreamsStillOpenAfterTheDrainTimeout() throws Exception {
    start("shutdown.drain_timeout=300ms");
    HealthWatch watch = HealthWatch.open(channel, EXT_PROC);
    watch.await(ServingStatus.SERVING, Duration.ofSeconds(5));

    long begin = System.nanoTime();
    runtime.close();
    Duration took = Duration.ofNanos(System.nanoTime() - begin);

    assertThat(took).isGreaterThanOrEqualTo(Duration.ofMillis(300)).isLessThan(Duration.ofSeconds(3));
    assertThat(watch.ended().get(5, TimeUnit.SECONDS).getCode()).isNotEqualTo(Status.Code.OK);
    assertThat(runtime.isTerminated()).isTrue();
  }

  @Test
  void aRedisUriLettuceRejectsIsAConfigErrorNamingTheKeyWithoutThePassword() {
    // Checked by the parser the store connects with (RedisUris), before anything starts.
    assertThatThrownBy(
            () -> ServerRuntime.start(config("store.type=redis", "store.redis_uri=redis://user:s3cret@127.0.0.1:6379/x")))
        .isInstanceOf(io.disaggusage.extproc.config.ConfigException.class)
        .hasMessageContaining(
            "store.redis_uri: invalid Redis URI \"redis://***@127.0.0.1:6379/x\": the database (path) must be a number")
        .message()
        .doesNotContain("s3cret");
  }

  @Test
  void redisStoreStartsNotReadyWhileRedisIsUnreachableAndBecomesReadyWhenItAnswers() throws Exception {
    int port = RedisServer.unusedPort();
    start("store.type=redis", "store.redis_uri=redis://127.0.0.1:" + port);
    assertThat(runtime.store()).isInstanceOf(RedisContextUsageStore.class);
    assertThat(health().check(service(EXT_PROC)).getStatus()).isEqualTo(ServingStatus.SERVING);
    HttpResponse<String> readyz = get("/readyz");
    assertThat(readyz.statusCode()).isEqualTo(503);
    assertThat(readyz.body()).isEqualTo("not ready: context usage store not ready\n");
    assertThat(get("/metrics").body()).contains("disagg_usage_store_ready 0");

    try (RedisServer redis = RedisServer.startOn(port)) {
      Poll.until("ready once Redis answers", Duration.ofSeconds(10), () -> get("/readyz").statusCode() == 200);
      assertThat(get("/readyz").statusCode()).isEqualTo(200);
      assertThat(get("/metrics").body()).contains("disagg_usage_store_ready 1");
    }
  }

  @Test
  void portsInUseAreStartupErrorsNamingTheKey() throws Exception {
    try (ServerSocket taken = new ServerSocket(0)) {
      int port = taken.getLocalPort();
      assertThatThrownBy(() -> ServerRuntime.start(config("grpc.port=" + port)))
          .isInstanceOf(StartupException.class)
          .hasMessageStartingWith("grpc.port " + port + ": cannot listen: ")
          .hasMessageContaining("in use");
      assertThatThrownBy(() -> ServerRuntime.start(config("admin.port=" + port)))
          .isInstanceOf(StartupException.class)
          .hasMessageStartingWith("admin.port " + port + ": cannot listen: ")
          .hasMessageContaining("in use");
    }
  }

  private List<String> listServices() throws Exception {
    CompletableFuture<List<String>> names = new CompletableFuture<>();
    StreamObserver<ServerReflectionRequest> requests =
        ServerReflectionGrpc.newStub(channel)
            .serverReflectionInfo(
                new StreamObserver<>() {
                  @Override
                  public void onNext(ServerReflectionResponse response) {
                    names.complete(
                        response.getListServicesResponse().getServiceList().stream()
                            .map(ServiceResponse::getName)
                            .toList());
                  }

                  @Override
                  public void onError(Throwable t) {
                    names.completeExceptionally(t);
                  }

                  @Override
                  public void onCompleted() {}
                });
    requests.onNext(ServerReflectionRequest.newBuilder().setListServices("").build());
    requests.onCompleted();
    return names.get(5, TimeUnit.SECONDS);
  }
}
